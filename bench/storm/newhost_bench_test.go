package storm

import (
	"fmt"
	"net/http"
	"runtime"
	"strconv"
	"testing"

	"github.com/seed2409de8f/retryhttp"
)

// The cost of a destination host never called before, once a Transport
// already knows many: the happy GET to a new host, after hosts others.
// retryhttp keeps state per host (the retry budget's bucket, made by the
// first success while the budget has room); the bare transport and the
// peers keep none, so their new host costs what any GET does.

// newHostCounts are the host counts of BenchmarkNewHost's rows: one small,
// and the 100,000 hosts of issue 13.
var newHostCounts = []int{1000, 100_000}

// newHostPeers are the columns of BenchmarkNewHost: the libraries of
// peers() but retryhttp-nokeys, whose GET is retryhttp's. retryhttp has a
// budget of its own with room for twice hosts (RetryBudgetOptions.MaxHosts),
// so that every new host of the run is added, not refused for want of room.
func newHostPeers(hosts int) []peer {
	var ps []peer
	for _, p := range peers() {
		switch p.name {
		case "retryhttp-nokeys":
			continue
		case "retryhttp":
			p.wrap = func(base http.RoundTripper) http.RoundTripper {
				budget := retryhttp.NewRetryBudget(retryhttp.RetryBudgetOptions{MaxHosts: 2 * hosts})
				return retryhttp.New(retryhttp.WithTransport(base), retryhttp.WithDelayFn(noWait), retryhttp.WithRetryBudget(budget))
			}
		}
		ps = append(ps, p)
	}
	return ps
}

// knownHosts is a transport that has been sent one GET to each of the
// hosts h0.test to h<next-1>.test.
type knownHosts struct {
	rt    http.RoundTripper
	first int // the hosts it was made with
	next  int // the next new host
	heap  float64
}

// newKnownHosts sends a GET to hosts hosts through p's transport and
// measures the live heap they added, per host.
func newKnownHosts(p peer, hosts int) (*knownHosts, error) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	k := &knownHosts{rt: p.wrap(memTransport{}), first: hosts}
	for range hosts {
		if err := k.send(); err != nil {
			return nil, err
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	k.heap = (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / float64(hosts)
	runtime.KeepAlive(k)
	return k, nil
}

// send sends a GET to the next new host.
func (k *knownHosts) send() error {
	url := "http://h" + strconv.Itoa(k.next) + ".test/"
	k.next++
	return once(k.rt, url, newGET)
}

// BenchmarkNewHost: the happy GET to a host the transport has never seen,
// once it has seen hosts others (hosts=N). Besides time, bytes and
// allocations per new host, it reports heapB/host: the live heap that the
// first N hosts added, per host (about 0 where nothing is kept per host).
//
// The transport that knows N hosts is made once per row and reused by the
// runs that testing.B makes with growing b.N, until it has seen 2N hosts:
// then it is made again, the timer stopped. Making it sends N GETs, which
// takes as long as N new hosts do. An instruction count (bench/cost/run.sh)
// must keep b.N+1 below N, so that it is made only once.
func BenchmarkNewHost(b *testing.B) {
	for _, hosts := range newHostCounts {
		for _, p := range newHostPeers(hosts) {
			b.Run(fmt.Sprintf("hosts=%d/lib=%s", hosts, p.name), newHost(p, hosts))
		}
	}
}

// newHost is the body of a row of BenchmarkNewHost.
func newHost(p peer, hosts int) func(*testing.B) {
	var k *knownHosts
	return func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if k == nil || k.next >= 2*k.first {
				b.StopTimer()
				k = nil // the old one's hosts can be collected meanwhile
				var err error
				if k, err = newKnownHosts(p, hosts); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			if err := k.send(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(k.heap, "heapB/host")
	}
}
