package p9

import "fmt"

// jsonPrefix reports whether text can still become one whole JSON value
// (surrounded by white space) if more is written after it: nil when it
// can (a whole value is such a prefix too), else an error saying at which
// byte it went wrong. A streaming check, one pass, no allocation but the
// nesting stack: a FUSE client never shows the error of a close, so a
// file that can no longer be valid ("{bad") is refused at the write that
// makes it so.
func jsonPrefix(text []byte) error {
	var p prefixScanner
	for i, c := range text {
		if !p.step(c) {
			return fmt.Errorf("byte %d (%s) cannot continue a JSON value", i+1, quoteByte(c))
		}
	}
	return nil
}

func quoteByte(c byte) string {
	if c >= 0x20 && c < 0x7f {
		return fmt.Sprintf("%q", rune(c))
	}
	return fmt.Sprintf("%#02x", c)
}

// Scanner states.
const (
	psValue    = iota // a value is expected
	psObjFirst        // after '{': a key or '}'
	psObjKey          // after ',' in an object: a key
	psColon           // after a key: ':'
	psObjNext         // after a member: ',' or '}'
	psArrFirst        // after '[': a value or ']'
	psArrNext         // after an element: ',' or ']'
	psString          // in a string
	psEscape          // after '\' in a string
	psUnicode         // in the hex digits of \uXXXX
	psMinus           // after a leading '-'
	psZero            // after a leading 0
	psInt             // in the digits of the integer part
	psDot             // after '.'
	psFrac            // in the fraction digits
	psE               // after 'e' or 'E'
	psESign           // after the exponent's sign
	psExp             // in the exponent digits
	psLiteral         // in true, false or null
	psEnd             // after the top-level value: only white space
)

// prefixScanner is the state of jsonPrefix.
type prefixScanner struct {
	state int
	stack []byte // '{' or '[' for each open container
	key   bool   // the string being read is an object key
	hex   int    // hex digits still expected in \uXXXX
	lit   string // the rest of the literal being read
}

func isWhite(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
func isDigit(c byte) bool { return '0' <= c && c <= '9' }
func isHex(c byte) bool {
	return isDigit(c) || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// valueDone moves to the state after a complete value.
func (p *prefixScanner) valueDone() {
	switch {
	case len(p.stack) == 0:
		p.state = psEnd
	case p.stack[len(p.stack)-1] == '{':
		p.state = psObjNext
	default:
		p.state = psArrNext
	}
}

// startValue begins the value whose first byte is c.
func (p *prefixScanner) startValue(c byte) bool {
	switch {
	case c == '{':
		p.stack = append(p.stack, '{')
		p.state = psObjFirst
	case c == '[':
		p.stack = append(p.stack, '[')
		p.state = psArrFirst
	case c == '"':
		p.key, p.state = false, psString
	case c == '-':
		p.state = psMinus
	case c == '0':
		p.state = psZero
	case '1' <= c && c <= '9':
		p.state = psInt
	case c == 't':
		p.lit, p.state = "rue", psLiteral
	case c == 'f':
		p.lit, p.state = "alse", psLiteral
	case c == 'n':
		p.lit, p.state = "ull", psLiteral
	default:
		return false
	}
	return true
}

// endNumber ends a number at c, which is not part of it, and takes c in
// the state that follows.
func (p *prefixScanner) endNumber(c byte) bool {
	p.valueDone()
	return p.step(c)
}

// step takes one byte and reports whether the text can still be valid.
func (p *prefixScanner) step(c byte) bool {
	switch p.state {
	case psValue:
		return isWhite(c) || p.startValue(c)
	case psObjFirst, psObjKey:
		switch {
		case isWhite(c):
		case c == '"':
			p.key, p.state = true, psString
		case c == '}' && p.state == psObjFirst:
			p.stack = p.stack[:len(p.stack)-1]
			p.valueDone()
		default:
			return false
		}
	case psColon:
		switch {
		case isWhite(c):
		case c == ':':
			p.state = psValue
		default:
			return false
		}
	case psObjNext, psArrNext:
		end, next := byte('}'), psObjKey
		if p.state == psArrNext {
			end, next = ']', psValue
		}
		switch {
		case isWhite(c):
		case c == ',':
			p.state = next
		case c == end:
			p.stack = p.stack[:len(p.stack)-1]
			p.valueDone()
		default:
			return false
		}
	case psArrFirst:
		switch {
		case isWhite(c):
		case c == ']':
			p.stack = p.stack[:len(p.stack)-1]
			p.valueDone()
		default:
			return p.startValue(c)
		}
	case psString:
		switch {
		case c == '"':
			if p.key {
				p.state = psColon
			} else {
				p.valueDone()
			}
		case c == '\\':
			p.state = psEscape
		case c < 0x20:
			return false
		}
	case psEscape:
		switch c {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			p.state = psString
		case 'u':
			p.hex, p.state = 4, psUnicode
		default:
			return false
		}
	case psUnicode:
		if !isHex(c) {
			return false
		}
		if p.hex--; p.hex == 0 {
			p.state = psString
		}
	case psMinus:
		switch {
		case c == '0':
			p.state = psZero
		case '1' <= c && c <= '9':
			p.state = psInt
		default:
			return false
		}
	case psZero, psInt:
		switch {
		case isDigit(c) && p.state == psInt:
		case c == '.':
			p.state = psDot
		case c == 'e' || c == 'E':
			p.state = psE
		default:
			return p.endNumber(c)
		}
	case psDot:
		if !isDigit(c) {
			return false
		}
		p.state = psFrac
	case psFrac:
		switch {
		case isDigit(c):
		case c == 'e' || c == 'E':
			p.state = psE
		default:
			return p.endNumber(c)
		}
	case psE:
		switch {
		case c == '+' || c == '-':
			p.state = psESign
		case isDigit(c):
			p.state = psExp
		default:
			return false
		}
	case psESign:
		if !isDigit(c) {
			return false
		}
		p.state = psExp
	case psExp:
		if !isDigit(c) {
			return p.endNumber(c)
		}
	case psLiteral:
		if c != p.lit[0] {
			return false
		}
		if p.lit = p.lit[1:]; p.lit == "" {
			p.valueDone()
		}
	case psEnd:
		return isWhite(c)
	}
	return true
}
