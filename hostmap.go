package retryhttp

import (
	"hash/maphash"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
)

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
	return hostKey{scheme: u.Scheme, host: u.Host}.canonical()
}

// canonical returns k without a port that is empty or its scheme's default.
func (k hostKey) canonical() hostKey {
	if i := portColon(k.host); i >= 0 {
		if port := k.host[i+1:]; port == "" || port == defaultPort(k.scheme) {
			k.host = k.host[:i]
		}
	}
	return k
}

// portColon returns the index of the colon before host's port if the port
// is all digits (or empty), or -1: it scans back over the digits at the
// end only, not over the whole host name. A port that is not all digits is
// never a scheme's default, so for keyOf it is as good as none.
func portColon(host string) int {
	for i := len(host) - 1; i >= 0; i-- {
		switch c := host[i]; {
		case c == ':':
			return i
		case c < '0' || c > '9':
			return -1
		}
	}
	return -1
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
		return k.scheme + "://" + host + ":" + p // one allocation, as below
	}
	return k.scheme + "://" + host
}

// clone returns a copy of k that does not keep the request's URL alive.
func (k hostKey) clone() hostKey {
	return hostKey{strings.Clone(k.scheme), strings.Clone(k.host)}
}

// evictable is a value of a hostMap: one that can tell when dropping it
// loses nothing (idle), and when it must not be dropped at all (busy: the
// retry state of a host with parked retries or retries in flight, which
// their callers still use).
type evictable interface {
	idle() bool
	busy() bool
}

// maxShards is the number of shards of a hostMap that tracks many hosts.
const maxShards = 32

// evictScan is how many entries a full shard looks at for an idle one to
// evict before it evicts an arbitrary one.
const evictScan = 8

// hostMap maps hosts to values (buckets, circuit breakers), with at most
// maxHosts entries, busy ones aside. A host is found by one hash of its
// host[:port], which picks its shard and, within the shard, its chain (the
// scheme is compared, not hashed: http and https of one host share a
// chain).
//
// Readers take no lock and write no shared memory: they load the shard's
// table of chains and walk a chain with atomic loads (a read lock would
// write the lock's reader count on every lookup). Writers take the shard's
// mutex: adding a host links one entry at the head of its chain, evicting
// one unlinks it, so both cost the same whatever the number of hosts. A
// shard's table has a chain per host it holds at most (maxHosts / shards,
// rounded up to a power of two), made at its first host and never resized:
// the memory is bounded by maxHosts. Hosts that must not be evicted (busy)
// may push a shard past that; they lengthen its chains, and leave when idle.
type hostMap[V evictable] struct {
	seed     maphash.Seed
	shards   []hostShard[V]
	chains   int // per shard: a power of two
	maxHosts int64
	total    atomic.Int64 // entries in all the shards
	newValue func(hostKey) V

	// last is the entry a lookup found last: a run of lookups of one host,
	// the usual traffic of a client, skips the hash and the chain. It is
	// written only when it changes.
	last atomic.Pointer[hostEntry[V]]
}

type hostShard[V evictable] struct {
	table atomic.Pointer[[]atomic.Pointer[hostEntry[V]]] // nil until the first host
	mu    sync.Mutex                                     // serialises writers
	n     int                                            // entries; guarded by mu
	_     [64]byte                                       // keeps neighbouring shards off one cache line
}

// hostEntry is one host of a chain.
type hostEntry[V evictable] struct {
	key   hostKey
	value V
	next  atomic.Pointer[hostEntry[V]] // set before the entry is linked
	gone  atomic.Bool                  // unlinked: hostMap.last must not find it
	plain bool                         // key.canonical() == key: see lastOf
}

// newHostMap returns a map of about maxHosts (≥ 1) entries whose missing
// values are made by newValue. Eviction starts when the whole map holds
// maxHosts entries, whatever their spread over the shards; a new host whose
// shard is empty then is added all the same, so the map holds at most
// maxHosts + shards − 1 entries.
func newHostMap[V evictable](maxHosts int, newValue func(hostKey) V) *hostMap[V] {
	n := min(maxShards, maxHosts)
	chains := 1
	for chains*n < maxHosts {
		chains *= 2
	}
	return &hostMap[V]{
		seed:     maphash.MakeSeed(),
		shards:   make([]hostShard[V], n),
		chains:   chains,
		maxHosts: int64(maxHosts),
		newValue: newValue,
	}
}

// locate returns the hash of k and its shard.
func (h *hostMap[V]) locate(k hostKey) (uint64, *hostShard[V]) {
	hash := maphash.String(h.seed, k.host)
	return hash, &h.shards[hash%uint64(len(h.shards))]
}

// chain returns the head of the chain of hash in table t.
func chain[V evictable](t []atomic.Pointer[hostEntry[V]], hash uint64) *atomic.Pointer[hostEntry[V]] {
	return &t[(hash>>32)&uint64(len(t)-1)]
}

// get returns the value of k, if there is one. It takes no lock and does
// not allocate.
func (h *hostMap[V]) get(k hostKey) (V, bool) {
	if e := h.last.Load(); e != nil && e.key.host == k.host && sameScheme(e.key.scheme, k.scheme) && !e.gone.Load() {
		return e.value, true
	}
	hash, s := h.locate(k)
	e := s.find(hash, k)
	if e == nil {
		var zero V
		return zero, false
	}
	h.last.Store(e)
	return e.value, true
}

// lastOf returns the value of the last entry found if it is the entry of
// u's host, recognised without making u's key: u's scheme and host as they
// are equal the entry's key, and that key is canonical (plain). keyOf's
// key of u is then the entry's own, so get would return the same value;
// for a URL spelled otherwise (a default port) it reports false and the
// caller makes the key. It takes no lock and does not allocate.
func (h *hostMap[V]) lastOf(u *url.URL) (V, bool) {
	if e := h.last.Load(); e != nil && u != nil && e.plain && e.key.host == u.Host && sameScheme(e.key.scheme, u.Scheme) && !e.gone.Load() {
		return e.value, true
	}
	var zero V
	return zero, false
}

func (s *hostShard[V]) get(hash uint64, k hostKey) (V, bool) {
	if e := s.find(hash, k); e != nil {
		return e.value, true
	}
	var zero V
	return zero, false
}

// find returns the entry of k, nil if there is none.
func (s *hostShard[V]) find(hash uint64, k hostKey) *hostEntry[V] {
	if t := s.table.Load(); t != nil {
		for e := chain(*t, hash).Load(); e != nil; e = e.next.Load() {
			if e.key.host == k.host && sameScheme(e.key.scheme, k.scheme) {
				return e
			}
		}
	}
	return nil
}

// sameScheme reports whether a == b, comparing with the usual schemes
// inline rather than by a call.
func sameScheme(a, b string) bool {
	switch b {
	case "http":
		return a == "http"
	case "https":
		return a == "https"
	}
	return a == b
}

// getIfRoom returns the value of k, making it if it is missing and the map
// has room for it without evicting another: for the hosts of successful
// requests, so that a client calling more hosts than the map holds does not
// churn through it (and allocate) on every success.
func (h *hostMap[V]) getIfRoom(k hostKey) (V, bool) {
	if v, ok := h.get(k); ok || h.total.Load() >= h.maxHosts {
		return v, ok
	}
	return h.getOrCreate(k), true
}

// getOrCreate returns the value of k, making it if it is missing.
func (h *hostMap[V]) getOrCreate(k hostKey) V {
	if v, ok := h.get(k); ok {
		return v
	}
	hash, s := h.locate(k)
	return h.create(hash, s, k)
}

// create is getOrCreate for a host that was missing a moment ago.
func (h *hostMap[V]) create(hash uint64, s *hostShard[V], k hostKey) V {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.get(hash, k); ok {
		return v
	}
	t := s.table.Load()
	if t == nil {
		made := make([]atomic.Pointer[hostEntry[V]], h.chains)
		t = &made
		s.table.Store(t)
	}
	if h.total.Load() < h.maxHosts || s.n == 0 || !s.evict(*t, hash) {
		h.total.Add(1) // else one out, one in: the total stays
	}
	e := &hostEntry[V]{key: k.clone()}
	e.plain = e.key.canonical() == e.key
	e.value = h.newValue(e.key)
	head := chain(*t, hash)
	e.next.Store(head.Load())
	head.Store(e)
	s.n++
	return e.value
}

// evict unlinks one entry of the shard: an idle one among the first few
// seen, else the first seen that is not busy, looking from a chain picked
// by from (a hash: in effect, at random). It reports false, dropping
// nothing, when every entry is busy: the map then grows past maxHosts by
// the hosts with parked retries. s.mu must be held.
func (s *hostShard[V]) evict(t []atomic.Pointer[hostEntry[V]], from uint64) bool {
	var victim *hostEntry[V]
	var victimChain *atomic.Pointer[hostEntry[V]]
	seen := 0
	start := int(from>>32) & (len(t) - 1)
scan:
	for i := range t {
		c := &t[(start+i)&(len(t)-1)]
		for e := c.Load(); e != nil; e = e.next.Load() {
			if e.value.busy() {
				continue
			}
			idle := e.value.idle()
			if victim == nil || idle {
				victim, victimChain = e, c
			}
			seen++
			if idle || seen >= evictScan {
				break scan
			}
		}
	}
	if victim == nil {
		return false
	}
	s.unlink(victimChain, victim)
	return true
}

// unlink removes e from the chain that starts at head. Readers walking the
// chain meanwhile still find their way: e keeps its next. s.mu must be
// held.
func (s *hostShard[V]) unlink(head *atomic.Pointer[hostEntry[V]], e *hostEntry[V]) {
	for link := head; link.Load() != nil; link = &link.Load().next {
		if link.Load() == e {
			e.gone.Store(true)
			link.Store(e.next.Load())
			s.n--
			return
		}
	}
}

// len returns the number of entries.
func (h *hostMap[V]) len() int {
	n := 0
	for i := range h.shards {
		s := &h.shards[i]
		s.mu.Lock()
		n += s.n
		s.mu.Unlock()
	}
	return n
}

// each calls fn with every entry until fn returns false. It takes no lock:
// it walks each shard's chains as they are when reached, so a host added or
// evicted meanwhile may be seen or not.
func (h *hostMap[V]) each(fn func(hostKey, V) bool) {
	for i := range h.shards {
		t := h.shards[i].table.Load()
		if t == nil {
			continue
		}
		for j := range *t {
			for e := (*t)[j].Load(); e != nil; e = e.next.Load() {
				if !fn(e.key, e.value) {
					return
				}
			}
		}
	}
}
