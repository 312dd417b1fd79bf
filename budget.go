package retryhttp

import (
	"hash/maphash"
	"math"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
)

// Defaults of RetryBudgetOptions.
const (
	// DefaultRetryBudgetRatio is the number of tokens a successful attempt
	// deposits: one retry for every ten successes.
	DefaultRetryBudgetRatio = 0.1

	// DefaultRetryBudgetCapacity is the size of each host's bucket, and the
	// number of tokens it starts with: ten retries in a row from a fresh
	// budget.
	DefaultRetryBudgetCapacity = 10

	// DefaultRetryBudgetMaxHosts bounds the number of hosts a budget tracks.
	DefaultRetryBudgetMaxHosts = 1024
)

// RetryBudgetOptions configures NewRetryBudget. The zero value of each field
// means its default; so does an invalid value (negative, NaN or infinite).
type RetryBudgetOptions struct {
	// Ratio is the number of tokens that a successful attempt deposits in
	// its host's bucket; each retry withdraws one. The default is
	// DefaultRetryBudgetRatio, 0.1: in the long run, retries are at most a
	// tenth of the successes, plus Capacity.
	Ratio float64

	// Capacity is the size of each host's bucket and the number of tokens
	// it starts with: the number of retries allowed in a row before any
	// success. The default is DefaultRetryBudgetCapacity, 10. Values above
	// 2^30 are treated as 2^30.
	Capacity int

	// MaxHosts bounds the number of hosts whose buckets are kept. Past it, a
	// new host evicts another (one whose bucket is full if one is found
	// quickly, else an arbitrary one), which starts again with a full
	// bucket when it next fails. The default is DefaultRetryBudgetMaxHosts,
	// 1024.
	MaxHosts int
}

// RetryBudget caps the retries sent to each destination host, so that a
// failing backend sees about as many requests as its callers make, not four
// times as many. It keeps a token bucket per host (scheme, host name and
// port): each bucket starts full with Capacity tokens; a retry is sent only
// if it can withdraw one token; a successful attempt deposits Ratio tokens,
// up to Capacity. Failures themselves take nothing: only retries spend.
//
// An attempt is successful when it brings a response with a status below
// 500 other than 429, and, for a 4xx status, without a Retry-After header: a
// response that tells the client the server is answering and not asking to
// be left alone. Errors and other responses deposit nothing.
//
// So a fresh budget allows Capacity retries in a row; over time, retries
// to a host are at most Ratio times its successful attempts plus Capacity;
// a host that fails everything gets Capacity retries and then none, until
// it succeeds again. docs/storms.md gives the arithmetic.
//
// A Transport has a budget of its own with the defaults unless
// WithRetryBudget says otherwise. A RetryBudget can be shared by several
// Transports that call the same backends (WithRetryBudget). It is safe for
// concurrent use; withdrawals and deposits take no lock beyond a shared
// read lock on one of several shards of the host map.
type RetryBudget struct {
	ratio    int64 // micro-tokens deposited per success, in [1, capacity]
	capacity int64 // micro-tokens
	hosts    *hostMap[*bucket]
}

// tokenScale is the number of micro-tokens in a token: buckets count in
// fixed point so that they can be updated with one atomic operation.
const tokenScale = 1_000_000

// maxBudgetCapacity bounds Capacity so that micro-tokens never overflow.
const maxBudgetCapacity = 1 << 30

// NewRetryBudget returns a budget configured by opts.
func NewRetryBudget(opts RetryBudgetOptions) *RetryBudget {
	capacity := opts.Capacity
	switch {
	case capacity <= 0:
		capacity = DefaultRetryBudgetCapacity
	case capacity > maxBudgetCapacity:
		capacity = maxBudgetCapacity
	}
	ratio := opts.Ratio
	if ratio <= 0 || math.IsNaN(ratio) || math.IsInf(ratio, 0) {
		ratio = DefaultRetryBudgetRatio
	}
	b := &RetryBudget{capacity: int64(capacity) * tokenScale}
	// A tiny ratio still deposits something; a huge one refills at once.
	b.ratio = int64(math.Round(min(ratio, float64(capacity)) * tokenScale))
	b.ratio = min(max(b.ratio, 1), b.capacity)
	maxHosts := opts.MaxHosts
	if maxHosts <= 0 {
		maxHosts = DefaultRetryBudgetMaxHosts
	}
	full := b.capacity
	b.hosts = newHostMap(maxHosts, func(hostKey) *bucket {
		bk := &bucket{capacity: full}
		bk.tokens.Store(full)
		return bk
	})
	return b
}

// WithRetryBudget sets the retry budget of the transport. A non-nil budget
// is used as it is and may be shared with other Transports; nil turns the
// budget off, so that retries are limited only by the retry count and the
// policy. Without this option, a Transport creates a budget of its own with
// the defaults of RetryBudgetOptions, on first use.
func WithRetryBudget(b *RetryBudget) Option {
	return func(t *Transport) {
		t.budget = b
		t.budgetSet = true
	}
}

// retryBudget returns the budget of t, nil when it is turned off.
func (t *Transport) retryBudget() *RetryBudget {
	if t.budgetSet {
		return t.budget
	}
	t.budgetOnce.Do(func() { t.ownBudget = NewRetryBudget(RetryBudgetOptions{}) })
	return t.ownBudget
}

// withdraw takes one token from the bucket of req's host and reports
// whether it could: whether one more attempt (a retry, or a hedge) may be
// sent. A nil budget allows everything.
func (b *RetryBudget) withdraw(req *http.Request) bool {
	if b == nil {
		return true
	}
	return b.hosts.getOrCreate(keyOf(req)).withdraw()
}

// deposit credits the bucket of req's host if the attempt that sent req
// was a success. A host with no bucket has a full one, so there is nothing
// to do: only withdrawals create buckets. It does not allocate.
func (b *RetryBudget) deposit(req *http.Request, res *http.Response) {
	if b == nil || !success(res) {
		return
	}
	if bk, ok := b.hosts.get(keyOf(req)); ok {
		bk.deposit(b.ratio)
	}
}

// success reports whether an attempt that ended with res shows a server
// that answers and does not ask to be left alone: a response below 500,
// other than 429, and for 4xx without Retry-After.
func success(res *http.Response) bool {
	switch {
	case res == nil, res.StatusCode >= 500, res.StatusCode == http.StatusTooManyRequests:
		return false
	case res.StatusCode >= 400:
		return res.Header.Get("Retry-After") == ""
	}
	return true
}

// errBudgetRefused joins ErrRetryBudgetExhausted with the last attempt's
// error, or returns nil when the attempt ended with a response.
func errBudgetRefused(err error) error {
	if err == nil {
		return nil
	}
	return joinErr(ErrRetryBudgetExhausted, err)
}

// bucket is the token bucket of one host, in micro-tokens. Each operation
// is one atomic compare-and-swap loop: no lock.
type bucket struct {
	tokens   atomic.Int64
	capacity int64
}

// withdraw takes one token if there is one.
func (bk *bucket) withdraw() bool {
	for {
		v := bk.tokens.Load()
		if v < tokenScale {
			return false
		}
		if bk.tokens.CompareAndSwap(v, v-tokenScale) {
			return true
		}
	}
}

// deposit adds n micro-tokens, up to the capacity. A full bucket, the usual
// state of a healthy host, is only read, so that goroutines depositing to
// the same host do not fight over its cache line.
func (bk *bucket) deposit(n int64) {
	for {
		v := bk.tokens.Load()
		if v >= bk.capacity {
			return
		}
		if bk.tokens.CompareAndSwap(v, min(v+n, bk.capacity)) {
			return
		}
	}
}

// idle reports whether the bucket is full, so that forgetting it loses
// nothing: a new bucket would be the same.
func (bk *bucket) idle() bool { return bk.tokens.Load() >= bk.capacity }

// hostKey identifies a destination: scheme, host name and port, the
// scheme's default port filled in when the URL has none. Its strings are
// substrings of the request's URL, so building one does not allocate.
type hostKey struct {
	scheme, host, port string
}

// keyOf returns the key of req's destination.
func keyOf(req *http.Request) hostKey {
	u := req.URL
	if u == nil {
		return hostKey{}
	}
	k := hostKey{scheme: u.Scheme, host: u.Hostname(), port: u.Port()}
	if k.port == "" {
		switch k.scheme {
		case "http":
			k.port = "80"
		case "https":
			k.port = "443"
		}
	}
	return k
}

// String returns the key as scheme://host:port, brackets around an IPv6
// address.
func (k hostKey) String() string {
	host := k.host
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return k.scheme + "://" + host + ":" + k.port
}

// clone returns a copy of k that does not keep the request's URL alive.
func (k hostKey) clone() hostKey {
	return hostKey{strings.Clone(k.scheme), strings.Clone(k.host), strings.Clone(k.port)}
}

// evictable is a value of a hostMap: one that can tell when dropping it
// loses nothing.
type evictable interface{ idle() bool }

// maxShards is the number of shards of a hostMap that tracks many hosts.
const maxShards = 32

// evictScan is how many entries a full shard looks at for an idle one to
// evict before it evicts an arbitrary one.
const evictScan = 8

// hostMap maps hosts to values (buckets, circuit breakers), with at most
// maxHosts entries. It is split in shards, each with its own lock, chosen
// by a hash of the host name, so that goroutines calling different hosts
// rarely share a lock and those calling one host share only its read lock.
type hostMap[V evictable] struct {
	seed     maphash.Seed
	shards   []hostShard[V]
	perShard int
	newValue func(hostKey) V
}

type hostShard[V evictable] struct {
	mu sync.RWMutex
	m  map[hostKey]V
	_  [64]byte // keeps neighbouring shards' locks off each other's cache line
}

// newHostMap returns a map of at most maxHosts (≥ 1) entries whose missing
// values are made by newValue.
func newHostMap[V evictable](maxHosts int, newValue func(hostKey) V) *hostMap[V] {
	n := min(maxShards, maxHosts)
	return &hostMap[V]{
		seed:     maphash.MakeSeed(),
		shards:   make([]hostShard[V], n),
		perShard: maxHosts / n,
		newValue: newValue,
	}
}

func (h *hostMap[V]) shard(k hostKey) *hostShard[V] {
	return &h.shards[maphash.String(h.seed, k.host)%uint64(len(h.shards))]
}

// get returns the value of k, if there is one. It does not allocate.
func (h *hostMap[V]) get(k hostKey) (V, bool) {
	s := h.shard(k)
	s.mu.RLock()
	v, ok := s.m[k]
	s.mu.RUnlock()
	return v, ok
}

// getOrCreate returns the value of k, making it if it is missing.
func (h *hostMap[V]) getOrCreate(k hostKey) V {
	s := h.shard(k)
	s.mu.RLock()
	v, ok := s.m[k]
	s.mu.RUnlock()
	if ok {
		return v
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.m[k]; ok {
		return v
	}
	if s.m == nil {
		s.m = make(map[hostKey]V)
	}
	if len(s.m) >= h.perShard {
		s.evict()
	}
	k = k.clone()
	v = h.newValue(k)
	s.m[k] = v
	return v
}

// evict drops one entry: an idle one among the first few seen, else the
// first seen (Go's map iteration order is random). Requires s.mu held.
func (s *hostShard[V]) evict() {
	var victim hostKey
	i := 0
	for k, v := range s.m {
		if i == 0 || v.idle() {
			victim = k
		}
		if v.idle() || i == evictScan-1 {
			break
		}
		i++
	}
	delete(s.m, victim)
}

// len returns the number of entries.
func (h *hostMap[V]) len() int {
	n := 0
	for i := range h.shards {
		s := &h.shards[i]
		s.mu.RLock()
		n += len(s.m)
		s.mu.RUnlock()
	}
	return n
}
