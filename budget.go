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

	// MaxHosts bounds the number of hosts whose buckets are kept (to within
	// one per shard of the map, at most 31 more). Past it, a new host evicts
	// another (one whose bucket is full if one is found
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
// concurrent use; withdrawals and deposits take no lock (only adding a new
// host does).
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

// refund gives back the token of a retry whose attempt, which sent req,
// ended with a success: for retries after a connection lost before any
// response (a keep-alive connection the server closed just as it was reused,
// say), which say nothing about the server's load. A server that keeps
// breaking connections gets nothing back.
func (b *RetryBudget) refund(req *http.Request, res *http.Response) {
	if b == nil || !success(res) {
		return
	}
	if bk, ok := b.hosts.get(keyOf(req)); ok {
		bk.deposit(tokenScale)
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

// hostKey identifies a destination: scheme, host name and port. A port that
// is the scheme's default is left out, so that http://h/ and http://h:80/
// have the same key. Its strings are substrings of the request's URL, so
// building one does not allocate.
type hostKey struct {
	scheme string
	host   string // host[:port], as in URL.Host, without a default port
}

// keyOf returns the key of req's destination.
func keyOf(req *http.Request) hostKey {
	u := req.URL
	if u == nil {
		return hostKey{}
	}
	k := hostKey{scheme: u.Scheme, host: u.Host}
	if i := strings.LastIndexByte(k.host, ':'); i >= 0 && !strings.Contains(k.host[i:], "]") {
		if port := k.host[i+1:]; port == "" || port == defaultPort(k.scheme) {
			k.host = k.host[:i]
		}
	}
	return k
}

// defaultPort returns the port of scheme when a URL names none.
func defaultPort(scheme string) string {
	switch scheme {
	case "http":
		return "80"
	case "https":
		return "443"
	}
	return ""
}

// String returns the key as scheme://host:port, the port always spelled
// out when the scheme has a default one.
func (k hostKey) String() string {
	host := k.host
	hasPort := false
	if i := strings.LastIndexByte(host, ':'); i >= 0 && !strings.Contains(host[i:], "]") {
		hasPort = true
	}
	if p := defaultPort(k.scheme); !hasPort && p != "" {
		host += ":" + p
	}
	return k.scheme + "://" + host
}

// clone returns a copy of k that does not keep the request's URL alive.
func (k hostKey) clone() hostKey {
	return hostKey{strings.Clone(k.scheme), strings.Clone(k.host)}
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
// maxHosts entries. A host is found by one hash of its host[:port], which
// picks its shard and, within the shard, its entry (the scheme is compared,
// not hashed: http and https of one host share a slot).
//
// Each shard's table is never modified once published: readers load it with
// one atomic read and take no lock, so goroutines calling one host do not
// write to any shared memory to find its value (a read lock would: every
// RLock writes the lock's reader count). Adding a host copies its shard's
// table, of about maxHosts/shards entries, under the shard's mutex; that
// happens once per host, or on each new host once the map is full.
type hostMap[V evictable] struct {
	seed     maphash.Seed
	shards   []hostShard[V]
	maxHosts int64
	total    atomic.Int64 // entries in all the shards
	newValue func(hostKey) V
}

type hostShard[V evictable] struct {
	table atomic.Pointer[hostTable[V]] // read-only once stored
	mu    sync.Mutex                   // serialises writers
	_     [64]byte                     // keeps neighbouring shards off one cache line
}

// hostTable is the content of a shard: entries by hash of their host.
type hostTable[V evictable] struct {
	byHash map[uint64][]hostEntry[V]
	n      int
}

type hostEntry[V evictable] struct {
	key   hostKey
	value V
}

// newHostMap returns a map of about maxHosts (≥ 1) entries whose missing
// values are made by newValue. Eviction starts when the whole map holds
// maxHosts entries, whatever their spread over the shards; a new host whose
// shard is empty then is added all the same, so the map holds at most
// maxHosts + shards − 1 entries.
func newHostMap[V evictable](maxHosts int, newValue func(hostKey) V) *hostMap[V] {
	n := min(maxShards, maxHosts)
	return &hostMap[V]{
		seed:     maphash.MakeSeed(),
		shards:   make([]hostShard[V], n),
		maxHosts: int64(maxHosts),
		newValue: newValue,
	}
}

// locate returns the hash of k and its shard.
func (h *hostMap[V]) locate(k hostKey) (uint64, *hostShard[V]) {
	hash := maphash.String(h.seed, k.host)
	return hash, &h.shards[hash%uint64(len(h.shards))]
}

// get returns the value of k, if there is one. It takes no lock and does
// not allocate.
func (h *hostMap[V]) get(k hostKey) (V, bool) {
	hash, s := h.locate(k)
	return s.table.Load().get(hash, k)
}

func (t *hostTable[V]) get(hash uint64, k hostKey) (V, bool) {
	if t != nil {
		for _, e := range t.byHash[hash] {
			if e.key.host == k.host && e.key.scheme == k.scheme {
				return e.value, true
			}
		}
	}
	var zero V
	return zero, false
}

// getOrCreate returns the value of k, making it if it is missing.
func (h *hostMap[V]) getOrCreate(k hostKey) V {
	hash, s := h.locate(k)
	if v, ok := s.table.Load().get(hash, k); ok {
		return v
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.table.Load()
	if v, ok := old.get(hash, k); ok {
		return v
	}
	t := old.clone()
	if h.total.Load() >= h.maxHosts && t.n > 0 {
		t.evict() // one out, one in: the total stays
	} else {
		h.total.Add(1)
	}
	k = k.clone()
	v := h.newValue(k)
	t.byHash[hash] = append(t.byHash[hash], hostEntry[V]{k, v})
	t.n++
	s.table.Store(t)
	return v
}

// clone returns a copy of t (an empty table for nil) that can be changed.
func (t *hostTable[V]) clone() *hostTable[V] {
	c := &hostTable[V]{byHash: map[uint64][]hostEntry[V]{}}
	if t != nil {
		for hash, es := range t.byHash {
			c.byHash[hash] = append([]hostEntry[V](nil), es...)
		}
		c.n = t.n
	}
	return c
}

// evict drops one entry: an idle one among the first few seen, else the
// first seen (Go's map iteration order is random).
func (t *hostTable[V]) evict() {
	var victim hostKey
	var victimHash uint64
	i := 0
	for hash, es := range t.byHash {
		idle := es[0].value.idle()
		if i == 0 || idle {
			victim, victimHash = es[0].key, hash
		}
		if idle || i == evictScan-1 {
			break
		}
		i++
	}
	es := t.byHash[victimHash]
	for j := range es {
		if es[j].key == victim {
			es = append(es[:j], es[j+1:]...)
			break
		}
	}
	if len(es) == 0 {
		delete(t.byHash, victimHash)
	} else {
		t.byHash[victimHash] = es
	}
	t.n--
}

// len returns the number of entries.
func (h *hostMap[V]) len() int {
	n := 0
	for i := range h.shards {
		if t := h.shards[i].table.Load(); t != nil {
			n += t.n
		}
	}
	return n
}
