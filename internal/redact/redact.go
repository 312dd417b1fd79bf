// Package redact removes what may carry secrets (userinfo, query, fragment)
// from the URLs that error messages quote, for retryhttp's log records
// (WithLogger). The request's own URL is redacted by the caller; this
// package finds the others in the text of an error.
package redact

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/seed2409de8f/retryhttp/internal/errclass"
)

// Err returns err's message with every URL in it redacted to
// scheme://host/path: the request's own, in full or with its password masked
// (as http.Client's *url.Error quotes it, "***"), and any other (a redirect's
// target, a proxy's address, a nested client's request).
func Err(err error, req *http.Request, redacted string) string {
	msg := err.Error()
	if req != nil && req.URL != nil {
		for _, full := range []string{req.URL.String(), req.URL.Redacted()} {
			if full != "" && full != redacted {
				msg = strings.ReplaceAll(msg, full, redacted)
			}
		}
	}
	// A *url.Error quotes its URL as it was given: a redirect's Location
	// may be relative ("/next?token=…"), so no scheme gives it away.
	errclass.AnyInTree(err, func(e error) bool {
		if ue, ok := e.(*url.Error); ok && ue.URL != "" {
			if r := RawURL(ue.URL); r != ue.URL {
				msg = strings.ReplaceAll(msg, strconv.Quote(ue.URL), strconv.Quote(r))
			}
		}
		return false
	})
	return URLsIn(msg)
}

// URLsIn returns msg with the userinfo, query and fragment of every
// URL in it (scheme://…) removed. A URL ends at a space, a quote or an
// angle bracket; one that follows a double quote ends at the next double
// quote only, since a raw query may hold spaces.
func URLsIn(msg string) string {
	var b strings.Builder
	rest := msg
	for {
		i := strings.Index(rest, "://")
		if i < 0 {
			break
		}
		start := i
		for start > 0 && isSchemeByte(rest[start-1]) {
			start--
		}
		if start == i { // "://" with no scheme before it
			b.WriteString(rest[:i+3])
			rest = rest[i+3:]
			continue
		}
		quoted := start > 0 && rest[start-1] == '"'
		end := i + 3
		for end < len(rest) && !endsURL(rest[end], quoted) {
			end++
		}
		b.WriteString(rest[:start])
		b.WriteString(RawURL(rest[start:end]))
		rest = rest[end:]
	}
	if b.Len() == 0 {
		return msg
	}
	b.WriteString(rest)
	return b.String()
}

// RawURL returns raw, a URL, without its userinfo, query and
// fragment.
func RawURL(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok { // a relative reference: no userinfo
		if i := strings.IndexAny(raw, "?#"); i >= 0 {
			return raw[:i]
		}
		return raw
	}
	authority, path, slash := strings.Cut(rest, "/")
	// Userinfo first: a password may hold '?' or '#' (escaped or not).
	if i := strings.LastIndexByte(authority, '@'); i >= 0 {
		authority = authority[i+1:]
	}
	if i := strings.IndexAny(authority, "?#"); i >= 0 {
		authority, path, slash = authority[:i], "", false
	}
	if i := strings.IndexAny(path, "?#"); i >= 0 {
		path = path[:i]
	}
	if slash {
		return scheme + "://" + authority + "/" + path
	}
	return scheme + "://" + authority
}

// isSchemeByte reports whether c may be part of a URL's scheme.
func isSchemeByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'
}

// endsURL reports whether c ends a URL quoted in a message: any of a
// space, a quote or an angle bracket, or, after a double quote, the next
// double quote only.
func endsURL(c byte, quoted bool) bool {
	if quoted {
		return c == '"'
	}
	return c == ' ' || c == '\t' || c == '\n' || c == '"' || c == '\'' || c == '<' || c == '>' || c == '`'
}
