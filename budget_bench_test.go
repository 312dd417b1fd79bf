package retryhttp_test

import (
	"fmt"
	"net/http"
	"runtime"
	"sync"
	"testing"

	"github.com/seed2409de8f/retryhttp"
)

// mutexBudget is the naive budget the benchmark compares with: the same
// bucket arithmetic, with every host behind one global mutex.
type mutexBudget struct {
	mu     sync.Mutex
	tokens map[string]float64
}

func (m *mutexBudget) withdraw(req *http.Request) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.tokens[req.URL.Host]
	if !ok {
		v = 10
	}
	if v < 1 {
		return false
	}
	m.tokens[req.URL.Host] = v - 1
	return true
}

func (m *mutexBudget) deposit(req *http.Request, res *http.Response) {
	if res.StatusCode >= 500 || res.StatusCode == http.StatusTooManyRequests {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if v, ok := m.tokens[req.URL.Host]; ok {
		m.tokens[req.URL.Host] = min(v+0.1, 10)
	}
}

// BenchmarkBudgetParallel hammers one host from GOMAXPROCS goroutines and
// from at least 64, with one withdrawal for every nine deposits (about the
// balance of a host that fails 10% of its requests): the sharded, atomic
// RetryBudget against the naive one behind a global mutex.
func BenchmarkBudgetParallel(b *testing.B) {
	ok := &http.Response{StatusCode: http.StatusOK, Header: http.Header{}}
	impls := []struct {
		name     string
		withdraw func(*http.Request) bool
		deposit  func(*http.Request, *http.Response)
	}{
		func() (s struct {
			name     string
			withdraw func(*http.Request) bool
			deposit  func(*http.Request, *http.Response)
		}) {
			rb := retryhttp.NewRetryBudget(retryhttp.RetryBudgetOptions{})
			s.name = "sharded-atomic"
			s.withdraw = func(r *http.Request) bool { return retryhttp.WithdrawFor(rb, r) }
			s.deposit = func(r *http.Request, res *http.Response) { retryhttp.DepositFor(rb, r, res) }
			return s
		}(),
		func() (s struct {
			name     string
			withdraw func(*http.Request) bool
			deposit  func(*http.Request, *http.Response)
		}) {
			mb := &mutexBudget{tokens: map[string]float64{}}
			s.name = "global-mutex"
			s.withdraw, s.deposit = mb.withdraw, mb.deposit
			return s
		}(),
	}
	procs := runtime.GOMAXPROCS(0)
	for _, goroutines := range []int{procs, max(64, procs)} {
		for _, impl := range impls {
			b.Run(fmt.Sprintf("%s/goroutines=%d", impl.name, goroutines), func(b *testing.B) {
				b.SetParallelism((goroutines + procs - 1) / procs)
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					req, _ := http.NewRequest(http.MethodGet, "http://backend.example/", nil)
					for i := 0; pb.Next(); i++ {
						if i%10 == 0 {
							impl.withdraw(req)
						} else {
							impl.deposit(req, ok)
						}
					}
				})
			})
		}
	}
}
