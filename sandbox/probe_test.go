package sandbox

import (
	"fmt"
	"net"
	"os"
	"strconv"
)

// probe is the test binary run as a tool: it tries what, prints "ok" and
// returns 0 when the attempt succeeded, else prints why to standard error
// and returns 1.
func probe(what string, args []string) int {
	err := func() error {
		switch what {
		case "connect-unix": // connect-unix PATH (a leading @: abstract)
			c, err := net.Dial("unix", args[0])
			if err != nil {
				return err
			}
			return c.Close()
		case "connect-tcp": // connect-tcp HOST:PORT
			c, err := net.Dial("tcp", args[0])
			if err != nil {
				return err
			}
			return c.Close()
		case "connect-mptcp": // connect-mptcp IPV4:PORT
			return connectMPTCP(args[0])
		case "bind-tcp": // bind-tcp HOST:PORT
			ln, err := net.Listen("tcp", args[0])
			if err != nil {
				return err
			}
			return ln.Close()
		case "ptrace": // ptrace PID
			pid, err := strconv.Atoi(args[0])
			if err != nil {
				return err
			}
			return ptraceSeize(pid) // exiting detaches
		}
		return fmt.Errorf("unknown probe %q", what)
	}()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("ok")
	return 0
}
