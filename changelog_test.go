package retryhttp_test

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestChangelogNamesShipped: every Go name that CHANGELOG.md's 0.1.0
// "Added" section puts in backticks (an identifier, Type.Member, or
// package.Name, with or without a call's arguments) exists in the exported
// API recorded under api/ by .ci/api.sh: a release lists what it shipped.
// A record is the packages' export data; a name is in it when it is one
// of its length-prefixed strings.
func TestChangelogNamesShipped(t *testing.T) {
	b, err := os.ReadFile("CHANGELOG.md")
	require.NoError(t, err)
	added := section(t, string(b), "## [0.1.0]", "### Added")
	records, err := filepath.Glob("api/*.export")
	require.NoError(t, err)
	require.NotEmpty(t, records)
	var api [][]byte
	for _, r := range records {
		data, err := os.ReadFile(r)
		require.NoError(t, err)
		api = append(api, data)
	}
	recorded := func(name string) bool {
		key := binary.AppendUvarint(nil, uint64(len(name)))
		key = append(key, name...)
		for _, data := range api {
			if bytes.Contains(data, key) {
				return true
			}
		}
		return false
	}
	packages := map[string]bool{"retryhttp": true, "otelretryhttp": true, "inbound": true, "destinations": true, "retryhttptest": true}
	for _, m := range goName.FindAllStringSubmatch(added, -1) {
		parts := strings.Split(m[1], ".")
		if len(parts) > 1 && packages[parts[0]] {
			parts = parts[1:]
		}
		if notAPI[parts[0]] || !isExported(parts[0]) || isTest(parts[0]) {
			continue
		}
		for _, p := range parts {
			if !recorded(p) {
				t.Errorf("CHANGELOG.md, 0.1.0 Added: `%s` names %s, which is not in the recorded API (api/*.export)", m[0][1:len(m[0])-1], p)
				break
			}
		}
	}
}

// goName is a backticked Go name: Name, Type.Member, package.Name, with
// arguments, a composite literal or a field value after it.
var goName = regexp.MustCompile("`([A-Za-z_][A-Za-z0-9_]*(?:\\.[A-Za-z_][A-Za-z0-9_]*)*)(?:\\([^`]*\\)|\\{[^`]*\\}|: [^`]*)?`")

// notAPI are exported-looking names in backticks that are no Go API of the
// modules: an HTTP method, an alert rule.
var notAPI = map[string]bool{"CONNECT": true, "RetryhttpBudgetExhausted": true}

// isTest reports whether name is a test, benchmark, fuzz target or
// example function, which the changelog names where it measures.
func isTest(name string) bool {
	for _, p := range []string{"Test", "Benchmark", "Fuzz", "Example"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

func isExported(s string) bool { return s != "" && 'A' <= s[0] && s[0] <= 'Z' }

// section returns the text of CHANGELOG's release heading's subsection
// sub, up to the next heading of its level or above.
func section(t *testing.T, doc, release, sub string) string {
	t.Helper()
	_, rest, ok := strings.Cut(doc, "\n"+release)
	require.True(t, ok, "no %q", release)
	_, rest, ok = strings.Cut(rest, "\n"+sub+"\n")
	require.True(t, ok, "no %q under %q", sub, release)
	if i := strings.Index(rest, "\n### "); i >= 0 {
		rest = rest[:i]
	}
	if i := strings.Index(rest, "\n## "); i >= 0 {
		rest = rest[:i]
	}
	return rest
}
