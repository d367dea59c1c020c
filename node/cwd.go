package node

import "github.com/toolnode/toolnode/calls"

// checkCwd checks a session's working directory against this node's
// rules (package calls), where the session is made and again where each
// call runs.
func (n *Node) checkCwd(cwd string) (string, error) {
	return calls.CwdRules{
		Node: n.cfg.Name, Yolo: n.cfg.Yolo,
		DataDir: n.cfg.DataDir, ToolsDir: n.cfg.ToolsDir, AgentsDir: n.cfg.AgentsDir,
		Workdirs: n.cfg.Workdirs,
		KernelFS: !refuseKernelFS,
	}.Check(cwd)
}

// refuseKernelFS is the kernel-filesystem rule, off only in the test
// that shows the attack it stops.
var refuseKernelFS = true
