package main

import (
	"fmt"
	"net/http"
	"os"
	"sort"
	"strings"
	"time"
)

// row is one library behind one proxy.
type row struct {
	proxy, lib                         string
	requests, posts, failed, failedGet int
	dupPost, dupGet, ghost, lost, hits int
	reasons                            map[string]int
	perSecond                          []int // failures by the second they were sent in
}

// tally counts, for each library, its requests and what the backends did
// with them.
func tally(proxyName string, libs []library, led *ledger) []row {
	rows := make([]row, len(libs))
	for i, l := range libs {
		rows[i] = row{proxy: proxyName, lib: l.name, reasons: map[string]int{}}
	}
	led.mu.Lock()
	defer led.mu.Unlock()
	for id, o := range led.outcomes {
		r := &rows[o.lib]
		n := led.hits[id]
		r.requests++
		r.hits += n
		if o.method == http.MethodPost {
			r.posts++
		}
		if !o.ok {
			sec := int(o.sent / time.Second)
			for len(r.perSecond) <= sec {
				r.perSecond = append(r.perSecond, 0)
			}
			r.perSecond[sec]++
			r.failed++
			if o.method == http.MethodGet {
				r.failedGet++
			}
			r.reasons[o.reason]++
			if n > 0 {
				r.ghost++
			}
		} else if n == 0 {
			r.lost++
		}
		if n > 1 {
			if o.method == http.MethodPost {
				r.dupPost++
			} else {
				r.dupGet++
			}
		}
	}
	return rows
}

// addRows adds the counts of more to the rows of the same proxy and
// library in rows, or appends them.
func addRows(rows, more []row) []row {
next:
	for _, m := range more {
		for i := range rows {
			r := &rows[i]
			if r.proxy == m.proxy && r.lib == m.lib {
				r.requests += m.requests
				r.posts += m.posts
				r.failed += m.failed
				r.failedGet += m.failedGet
				r.dupPost += m.dupPost
				r.dupGet += m.dupGet
				r.ghost += m.ghost
				r.lost += m.lost
				r.hits += m.hits
				for k, v := range m.reasons {
					r.reasons[k] += v
				}
				for len(r.perSecond) < len(m.perSecond) {
					r.perSecond = append(r.perSecond, 0)
				}
				for i, v := range m.perSecond {
					r.perSecond[i] += v
				}
				continue next
			}
		}
		rows = append(rows, m)
	}
	return rows
}

// printTable prints the rows, then each row's failure reasons.
func printTable(w *os.File, rows []row) {
	fmt.Fprintf(w, "%-8s %-26s %8s %6s %7s %10s %9s %8s %6s %9s\n",
		"proxy", "library", "requests", "POSTs", "failed", "failed GET", "dup POST", "dup GET", "ghost", "hits/req")
	for _, r := range rows {
		perReq := 0.0
		if r.requests > 0 {
			perReq = float64(r.hits) / float64(r.requests)
		}
		fmt.Fprintf(w, "%-8s %-26s %8d %6d %7d %10d %9d %8d %6d %9.4f\n",
			r.proxy, r.lib, r.requests, r.posts, r.failed, r.failedGet, r.dupPost, r.dupGet, r.ghost, perReq)
	}
	fmt.Fprintln(w, "\nfailures by cause:")
	for _, r := range rows {
		if r.failed == 0 {
			continue
		}
		var causes []string
		for k, v := range r.reasons {
			causes = append(causes, fmt.Sprintf("%s %d", k, v))
		}
		sort.Slice(causes, func(i, j int) bool { return count(causes[i]) > count(causes[j]) })
		fmt.Fprintf(w, "  %-8s %-26s %s\n", r.proxy, r.lib, strings.Join(causes, ", "))
	}
	fmt.Fprintln(w, "\nfailures by the second the request was sent in (faults at 2, 4, 6-8, 11.5 s; reloads at 10 and 12.5 s):")
	for _, r := range rows {
		if r.failed == 0 {
			continue
		}
		var secs []string
		for _, n := range r.perSecond {
			secs = append(secs, fmt.Sprint(n))
		}
		fmt.Fprintf(w, "  %-8s %-26s %s\n", r.proxy, r.lib, strings.Join(secs, " "))
	}
	for _, r := range rows {
		if r.lost > 0 {
			fmt.Fprintf(w, "CHECK: %s %s: %d requests answered 200 with no side effect recorded\n", r.proxy, r.lib, r.lost)
		}
	}
}

// count reads the number at the end of "cause N".
func count(s string) int {
	var n int
	_, _ = fmt.Sscanf(s[strings.LastIndexByte(s, ' ')+1:], "%d", &n)
	return n
}
