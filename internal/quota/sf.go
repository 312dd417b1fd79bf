package quota

import "strconv"

// A strict parser of the part of RFC 9651 (Structured Field Values) that
// the rate-limit fields use: Lists and Dictionaries whose members are Items
// (no Inner Lists), with parameters. A field that breaks the grammar is
// invalid as a whole, as RFC 9651 §4.2 says, and the IETF draft tells
// clients to ignore it. At most maxMembers members are read; the rest of
// the field is not looked at (thousands of policies cost no more than
// maxMembers).
//
// dunglas/httpsfv parses the whole RFC; it was not taken because the core
// module stays light (it would be the core's third dependency, for one
// header), it builds maps of interface values for every item, and it uses
// package reflect, which this module's code does not. docs/ratelimit.md.

// maxMembers bounds the members read from one field, and the parameters
// read from one member.
const maxMembers = 32

// Kinds of bare items.
const (
	sfInteger byte = 'i'
	sfString  byte = 's' // sf-string, unescaped
	sfToken   byte = 't'
	sfBool    byte = 'b' // n is 0 or 1
	sfDecimal byte = 'd' // kept as its text in s
	sfBytes   byte = 'y' // kept as its base64 text in s
)

// sfValue is a bare item.
type sfValue struct {
	kind byte
	s    string
	n    int64
}

// sfParam is a parameter of an item.
type sfParam struct {
	key string
	v   sfValue
}

// sfMember is a member of a List (key "") or of a Dictionary.
type sfMember struct {
	key    string
	v      sfValue
	params []sfParam
}

// param returns the value of the parameter key of m.
func (m *sfMember) param(key string) (sfValue, bool) {
	for _, p := range m.params {
		if p.key == key {
			return p.v, true
		}
	}
	return sfValue{}, false
}

// intParam returns the parameter key of m if it is a non-negative
// Integer.
func (m *sfMember) intParam(key string) (int64, bool) {
	v, ok := m.param(key)
	if !ok || v.kind != sfInteger || v.n < 0 {
		return 0, false
	}
	return v.n, true
}

// sfScanner reads a field value.
type sfScanner struct {
	s string
	i int
}

// parseList parses the lines of a List field (joined with commas, as RFC
// 9110 §5.3 allows). It reports false if the field is invalid.
func parseList(lines []string) ([]sfMember, bool) { return parseMembers(lines, false) }

// parseDict parses the lines of a Dictionary field.
func parseDict(lines []string) ([]sfMember, bool) { return parseMembers(lines, true) }

func parseMembers(lines []string, dict bool) ([]sfMember, bool) {
	var out []sfMember
	for _, line := range lines {
		sc := sfScanner{s: line}
		sc.skipSP()
		for sc.i < len(sc.s) {
			if len(out) == maxMembers {
				return out, true // bounded: the rest is not read
			}
			var m sfMember
			if dict {
				k, ok := sc.key()
				if !ok {
					return nil, false
				}
				m.key = k
				if sc.peek() == '=' {
					sc.i++
					if m.v, ok = sc.bareItem(); !ok {
						return nil, false
					}
				} else {
					m.v = sfValue{kind: sfBool, n: 1}
				}
			} else {
				var ok bool
				if m.v, ok = sc.bareItem(); !ok {
					return nil, false
				}
			}
			params, ok := sc.params()
			if !ok {
				return nil, false
			}
			m.params = params
			out = append(out, m)
			sc.skipOWS()
			if sc.i == len(sc.s) {
				break
			}
			if sc.s[sc.i] != ',' {
				return nil, false
			}
			sc.i++
			sc.skipOWS()
			if sc.i == len(sc.s) {
				return nil, false // a trailing comma
			}
		}
	}
	return out, true
}

func (sc *sfScanner) peek() byte {
	if sc.i < len(sc.s) {
		return sc.s[sc.i]
	}
	return 0
}

func (sc *sfScanner) skipSP() {
	for sc.i < len(sc.s) && sc.s[sc.i] == ' ' {
		sc.i++
	}
}

func (sc *sfScanner) skipOWS() {
	for sc.i < len(sc.s) && (sc.s[sc.i] == ' ' || sc.s[sc.i] == '\t') {
		sc.i++
	}
}

// params reads the parameters of an item (RFC 9651 §4.2.3.2); a parameter
// past maxMembers is read but not kept.
func (sc *sfScanner) params() ([]sfParam, bool) {
	var ps []sfParam
	for sc.peek() == ';' {
		sc.i++
		sc.skipSP()
		k, ok := sc.key()
		if !ok {
			return nil, false
		}
		v := sfValue{kind: sfBool, n: 1}
		if sc.peek() == '=' {
			sc.i++
			if v, ok = sc.bareItem(); !ok {
				return nil, false
			}
		}
		replaced := false
		for j := range ps {
			if ps[j].key == k { // a repeated key: the last value counts
				ps[j].v, replaced = v, true
			}
		}
		if !replaced && len(ps) < maxMembers {
			ps = append(ps, sfParam{key: k, v: v})
		}
	}
	return ps, true
}

// key reads a key: lcalpha or "*", then lcalpha, digits, "_-.*".
func (sc *sfScanner) key() (string, bool) {
	start := sc.i
	c := sc.peek()
	if !(c >= 'a' && c <= 'z' || c == '*') {
		return "", false
	}
	for sc.i++; sc.i < len(sc.s); sc.i++ {
		c := sc.s[sc.i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' || c == '*') {
			break
		}
	}
	return sc.s[start:sc.i], true
}

// bareItem reads an Integer, a Decimal, a String, a Token, a Byte Sequence
// or a Boolean.
func (sc *sfScanner) bareItem() (sfValue, bool) {
	switch c := sc.peek(); {
	case c == '-' || c >= '0' && c <= '9':
		return sc.number()
	case c == '"':
		return sc.str()
	case c == '*' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
		return sc.token(), true
	case c == ':':
		return sc.bytes()
	case c == '?':
		if sc.i+1 < len(sc.s) && (sc.s[sc.i+1] == '0' || sc.s[sc.i+1] == '1') {
			v := sfValue{kind: sfBool, n: int64(sc.s[sc.i+1] - '0')}
			sc.i += 2
			return v, true
		}
	}
	return sfValue{}, false
}

// number reads an Integer (at most 15 digits) or a Decimal (at most 12
// digits, a dot, 1 to 3 digits).
func (sc *sfScanner) number() (sfValue, bool) {
	start := sc.i
	if sc.peek() == '-' {
		sc.i++
	}
	digits, dot := 0, -1
	for ; sc.i < len(sc.s); sc.i++ {
		c := sc.s[sc.i]
		if c >= '0' && c <= '9' {
			digits++
			continue
		}
		if c == '.' && dot < 0 {
			dot = digits
			continue
		}
		break
	}
	text := sc.s[start:sc.i]
	switch {
	case dot < 0 && digits >= 1 && digits <= 15:
		n, err := strconv.ParseInt(text, 10, 64)
		return sfValue{kind: sfInteger, n: n}, err == nil
	case dot >= 1 && dot <= 12 && digits-dot >= 1 && digits-dot <= 3:
		return sfValue{kind: sfDecimal, s: text}, true
	}
	return sfValue{}, false
}

// str reads a String: printable ASCII between quotes, with \" and \\.
func (sc *sfScanner) str() (sfValue, bool) {
	sc.i++ // the opening quote
	var buf []byte
	start := sc.i
	for ; sc.i < len(sc.s); sc.i++ {
		switch c := sc.s[sc.i]; {
		case c == '\\':
			if sc.i+1 >= len(sc.s) || (sc.s[sc.i+1] != '"' && sc.s[sc.i+1] != '\\') {
				return sfValue{}, false
			}
			if buf == nil {
				buf = append([]byte{}, sc.s[start:sc.i]...)
			}
			sc.i++
			buf = append(buf, sc.s[sc.i])
		case c == '"':
			v := sfValue{kind: sfString, s: sc.s[start:sc.i]}
			if buf != nil {
				v.s = string(buf)
			}
			sc.i++
			return v, true
		case c < 0x20 || c > 0x7e:
			return sfValue{}, false
		default:
			if buf != nil {
				buf = append(buf, c)
			}
		}
	}
	return sfValue{}, false // unterminated
}

// token reads a Token: its first character is checked by bareItem.
func (sc *sfScanner) token() sfValue {
	start := sc.i
	for sc.i++; sc.i < len(sc.s) && isTokenChar(sc.s[sc.i]); sc.i++ {
	}
	return sfValue{kind: sfToken, s: sc.s[start:sc.i]}
}

// isTokenChar reports whether c is a tchar (RFC 9110 §5.6.2), ':' or '/'.
func isTokenChar(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	switch c {
	case '!', '#', '$', '%', '&', '\'', '*', '+', '-', '.', '^', '_', '`', '|', '~', ':', '/':
		return true
	}
	return false
}

// bytes reads a Byte Sequence, keeping its base64 text.
func (sc *sfScanner) bytes() (sfValue, bool) {
	sc.i++ // the opening colon
	start := sc.i
	for ; sc.i < len(sc.s); sc.i++ {
		c := sc.s[sc.i]
		if c == ':' {
			v := sfValue{kind: sfBytes, s: sc.s[start:sc.i]}
			sc.i++
			return v, true
		}
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '+' || c == '/' || c == '=') {
			return sfValue{}, false
		}
	}
	return sfValue{}, false
}
