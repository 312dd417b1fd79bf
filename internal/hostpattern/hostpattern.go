// Package hostpattern parses and compares the host patterns of retryhttp's
// destinations (Destination.Host): a host name or address, with or
// without a port, or a wildcard "*.example.com" that matches the hosts
// below a domain.
package hostpattern

import (
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// Pattern is a valid host pattern (retryhttp's Destination.Host),
// normalised.
type Pattern struct {
	Name     string // lower case, no trailing dot, IPv6 without brackets
	Port     string // "" for any port
	Wildcard bool   // "*." + name
}

// String returns the pattern as a Host would spell it.
func (h Pattern) String() string {
	name := h.Name
	if strings.Contains(name, ":") {
		name = "[" + name + "]"
	}
	switch {
	case h.Wildcard:
		return "*." + name
	case h.Port != "":
		return name + ":" + h.Port
	}
	return name
}

// Covers reports whether every request that h2 matches is matched by h, so
// that h2 placed after h is never used.
func (h Pattern) Covers(h2 Pattern) bool {
	switch {
	case h.Wildcard:
		return strings.HasSuffix(h2.Name, "."+h.Name) // and h2.Name == h.Name for a wildcard h2
	case h2.Wildcard:
		return false
	}
	return h.Name == h2.Name && (h.Port == "" || h.Port == h2.Port)
}

// Parse returns the pattern of a host that Check accepts.
func Parse(s string) Pattern {
	h, _ := Check(s)
	return h
}

// Check parses s as a host pattern, or says what is wrong with it.
func Check(s string) (Pattern, string) {
	const want = "must be a host such as api.example.com, api.example.com:8443 or *.example.com"
	if strings.Contains(s, "://") || strings.ContainsAny(s, "/?#@") {
		return Pattern{}, want + ", not a URL"
	}
	if strings.ContainsAny(s, " \t\r\n") {
		return Pattern{}, want + ", without spaces"
	}
	var h Pattern
	rest := s
	if after, ok := strings.CutPrefix(s, "*."); ok {
		h.Wildcard, rest = true, after
	}
	if strings.Contains(rest, "*") {
		return Pattern{}, "'*' is allowed only as the first label, as in *.example.com"
	}
	name := rest
	switch {
	case strings.HasPrefix(rest, "[") && h.Wildcard:
		return Pattern{}, "a wildcard takes a host name, not an address"
	case strings.HasPrefix(rest, "["):
		if !strings.HasSuffix(rest, "]") {
			var err error
			if name, h.Port, err = net.SplitHostPort(rest); err != nil {
				return Pattern{}, want
			}
		} else {
			name = rest[1 : len(rest)-1]
		}
		if a, err := netip.ParseAddr(name); err != nil || !a.Is6() {
			return Pattern{}, "must hold an IPv6 address in its brackets"
		}
	case strings.Count(rest, ":") == 1:
		name, h.Port, _ = strings.Cut(rest, ":")
	case strings.Count(rest, ":") > 1:
		if _, err := netip.ParseAddr(rest); err != nil {
			return Pattern{}, want
		}
	}
	if h.Port != "" || strings.HasSuffix(rest, ":") {
		if h.Wildcard {
			return Pattern{}, "a wildcard host takes no port"
		}
		if n, err := strconv.Atoi(h.Port); err != nil || n < 1 || n > 65535 || h.Port[0] == '0' {
			return Pattern{}, "must have a port from 1 to 65535"
		}
	}
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	if !strings.Contains(name, ":") && !validHostName(name) {
		return Pattern{}, want
	}
	h.Name = name
	return h, ""
}

// validHostName reports whether s is a host name or IPv4 address: labels of
// letters, digits, '-' and '_', separated by single dots.
func validHostName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}
