package main

import (
	"fmt"
	"html/template"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"
)

// section is the report of one scenario: a table, notes on how it was
// measured, the policies it compares, and its charts.
type section struct {
	id, title string
	notes     []string
	header    []string
	rows      [][]string
	policies  []policy
	charts    []chart
	loaded    []string // rows the machine was too loaded for (addMachineChecks)
}

// chart is one SVG file of a section.
type chart struct {
	file string
	svg  []byte
}

// print writes the section as a table for the terminal.
func (s section) print(w io.Writer) {
	fmt.Fprintf(w, "\n== %s\n\n", s.title)
	for _, n := range s.notes {
		fmt.Fprintf(w, "  %s\n", n)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(s.header, "\t"))
	for _, r := range s.rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	_ = tw.Flush()
	fmt.Fprintln(w)
	for _, p := range s.policies {
		fmt.Fprintf(w, "  %s: %s\n", p.name, p.about)
	}
}

// writeReport writes the charts of sections and an index.html embedding
// them into dir, and returns the path of index.html.
func writeReport(dir string, cfg config, sections []section) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	type htmlChart struct {
		File string
		SVG  template.HTML
	}
	type htmlSection struct {
		ID, Title string
		Notes     []string
		Header    []string
		Rows      [][]string
		Policies  []string
		Charts    []htmlChart
	}
	data := struct {
		Command  string
		When     string
		Sections []htmlSection
	}{Command: cfg.command(), When: time.Now().UTC().Format(time.RFC3339)}
	for _, s := range sections {
		hs := htmlSection{ID: s.id, Title: s.title, Notes: s.notes, Header: s.header, Rows: s.rows}
		for _, p := range s.policies {
			hs.Policies = append(hs.Policies, p.name+": "+p.about)
		}
		for _, c := range s.charts {
			if err := os.WriteFile(filepath.Join(dir, c.file), c.svg, 0o644); err != nil {
				return "", err
			}
			// The SVG is ours, written by svg.go with every text escaped.
			hs.Charts = append(hs.Charts, htmlChart{c.file, template.HTML(c.svg)})
		}
		data.Sections = append(data.Sections, hs)
	}
	path := filepath.Join(dir, "index.html")
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	if err := page.Execute(f, data); err != nil {
		f.Close()
		return "", err
	}
	return path, f.Close()
}

var page = template.Must(template.New("index").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>retrylab report</title>
<style>
body { font-family: sans-serif; max-width: 1100px; margin: 2em auto; padding: 0 1em; color: #222; }
.wide { overflow-x: auto; }
table { border-collapse: collapse; margin: 1em 0; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 6px; text-align: right; }
td { white-space: nowrap; }
svg { max-width: 100%; height: auto; }
th:first-child, td:first-child { text-align: left; }
code { background: #f4f4f4; padding: 1px 4px; }
figure { margin: 1em 0; }
</style></head>
<body>
<h1>retrylab: retry storms on loopback, with and without retryhttp's defences</h1>
<p>Made by <code>{{.Command}}</code> at {{.When}}.</p>
{{range .Sections}}
<h2 id="{{.ID}}">{{.Title}}</h2>
<ul>{{range .Notes}}<li>{{.}}</li>{{end}}</ul>
<div class="wide"><table>
<tr>{{range .Header}}<th>{{.}}</th>{{end}}</tr>
{{range .Rows}}<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>
{{end}}</table></div>
<ul>{{range .Policies}}<li>{{.}}</li>{{end}}</ul>
{{range .Charts}}<figure>{{.SVG}}<figcaption><a href="{{.File}}">{{.File}}</a></figcaption></figure>{{end}}
{{end}}
</body></html>
`))

// pct formats a share as a percentage.
func pct(v float64) string { return fmt.Sprintf("%.1f%%", 100*v) }

// ms formats a latency in milliseconds.
func ms(d time.Duration) string {
	v := float64(d) / float64(time.Millisecond)
	if v < 10 {
		return fmt.Sprintf("%.1fms", v)
	}
	return fmt.Sprintf("%.0fms", v)
}

// plural formats n and noun, with an s unless n is 1: "1 request",
// "12 requests".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// slug turns name into a part of a file name: lower-case letters and
// digits, other runs of characters as one '-': "immediate retry" becomes
// "immediate-retry".
func slug(name string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(name) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			b.WriteRune(r)
			dash = false
			continue
		}
		dash = true
	}
	return b.String()
}
