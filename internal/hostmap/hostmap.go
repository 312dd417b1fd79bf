// Package hostmap is the sharded per-host map of the retry budget, the
// circuit breaker and the hedge delay estimator: a bounded number of hosts,
// found without a lock, evicted one in one out; and the host key
// (scheme, host and port) by which they are found.
package hostmap

import (
	"hash/maphash"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
)

// Key identifies a destination: scheme, host name and port. A port that
// is the scheme's default is left out, so that http://h/ and http://h:80/
// have the same key. Its strings are substrings of the request's URL, so
// building one does not allocate.
type Key struct {
	Scheme string
	Host   string // host[:port], as in URL.Host, without a default port
}

// KeyOf returns the key of req's destination.
func KeyOf(req *http.Request) Key {
	u := req.URL
	if u == nil {
		return Key{}
	}
	return Key{Scheme: u.Scheme, Host: u.Host}.canonical()
}

// canonical returns k without a port that is empty or its scheme's default.
func (k Key) canonical() Key {
	if i := portColon(k.Host); i >= 0 {
		if port := k.Host[i+1:]; port == "" || port == DefaultPort(k.Scheme) {
			k.Host = k.Host[:i]
		}
	}
	return k
}

// portColon returns the index of the colon before host's port if the port
// is all digits (or empty), or -1: it scans back over the digits at the
// end only, not over the whole host name. A port that is not all digits is
// never a scheme's default, so for KeyOf it is as good as none.
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

// DefaultPort returns the port of scheme when a URL names none.
func DefaultPort(scheme string) string {
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
func (k Key) String() string {
	host := k.Host
	hasPort := false
	if i := strings.LastIndexByte(host, ':'); i >= 0 && !strings.Contains(host[i:], "]") {
		hasPort = true
	}
	if p := DefaultPort(k.Scheme); !hasPort && p != "" {
		return k.Scheme + "://" + host + ":" + p // one allocation, as below
	}
	return k.Scheme + "://" + host
}

// clone returns a copy of k that does not keep the request's URL alive.
func (k Key) clone() Key {
	return Key{strings.Clone(k.Scheme), strings.Clone(k.Host)}
}

// Evictable is a value of a Map: one that can tell when dropping it
// loses nothing (idle), and when it must not be dropped at all (busy: the
// retry state of a host with parked retries or retries in flight, which
// their callers still use).
type Evictable interface {
	Idle() bool
	Busy() bool
}

// maxShards is the number of shards of a Map that tracks many hosts.
const maxShards = 32

// evictScan is how many entries a full shard looks at for an idle one to
// evict before it evicts an arbitrary one.
const evictScan = 8

// Map maps hosts to values (buckets, circuit breakers), with at most
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
type Map[V Evictable] struct {
	seed     maphash.Seed
	shards   []shard[V]
	chains   int // per shard: a power of two
	maxHosts int64
	total    atomic.Int64 // entries in all the shards
	newValue func(Key) V

	// last is the entry a lookup found last: a run of lookups of one host,
	// the usual traffic of a client, skips the hash and the chain. It is
	// written only when it changes.
	last atomic.Pointer[entry[V]]
}

type shard[V Evictable] struct {
	table atomic.Pointer[[]atomic.Pointer[entry[V]]] // nil until the first host
	mu    sync.Mutex                                 // serialises writers
	n     int                                        // entries; guarded by mu
	_     [64]byte                                   // keeps neighbouring shards off one cache line
}

// entry is one host of a chain.
type entry[V Evictable] struct {
	key   Key
	value V
	next  atomic.Pointer[entry[V]] // set before the entry is linked
	gone  atomic.Bool              // unlinked: Map.last must not find it
	plain bool                     // key.canonical() == key: see LastOf
}

// New returns a map of about maxHosts (≥ 1) entries whose missing
// values are made by newValue. Eviction starts when the whole map holds
// maxHosts entries, whatever their spread over the shards; a new host whose
// shard is empty then is added all the same, so the map holds at most
// maxHosts + shards − 1 entries.
func New[V Evictable](maxHosts int, newValue func(Key) V) *Map[V] {
	n := min(maxShards, maxHosts)
	chains := 1
	for chains*n < maxHosts {
		chains *= 2
	}
	return &Map[V]{
		seed:     maphash.MakeSeed(),
		shards:   make([]shard[V], n),
		chains:   chains,
		maxHosts: int64(maxHosts),
		newValue: newValue,
	}
}

// locate returns the hash of k and its shard.
func (h *Map[V]) locate(k Key) (uint64, *shard[V]) {
	hash := maphash.String(h.seed, k.Host)
	return hash, &h.shards[hash%uint64(len(h.shards))]
}

// chain returns the head of the chain of hash in table t.
func chain[V Evictable](t []atomic.Pointer[entry[V]], hash uint64) *atomic.Pointer[entry[V]] {
	return &t[(hash>>32)&uint64(len(t)-1)]
}

// Get returns the value of k, if there is one. It takes no lock and does
// not allocate.
func (h *Map[V]) Get(k Key) (V, bool) {
	if e := h.last.Load(); e != nil && e.key.Host == k.Host && sameScheme(e.key.Scheme, k.Scheme) && !e.gone.Load() {
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

// LastOf returns the value of the last entry found if it is the entry of
// u's host, recognised without making u's key: u's scheme and host as they
// are equal the entry's key, and that key is canonical (plain). KeyOf's
// key of u is then the entry's own, so Get would return the same value;
// for a URL spelled otherwise (a default port) it reports false and the
// caller makes the key with KeyOf. It takes no lock and does not allocate.
func (h *Map[V]) LastOf(u *url.URL) (V, bool) {
	if e := h.last.Load(); e != nil && u != nil && e.plain && e.key.Host == u.Host && sameScheme(e.key.Scheme, u.Scheme) && !e.gone.Load() {
		return e.value, true
	}
	var zero V
	return zero, false
}

func (s *shard[V]) get(hash uint64, k Key) (V, bool) {
	if e := s.find(hash, k); e != nil {
		return e.value, true
	}
	var zero V
	return zero, false
}

// find returns the entry of k, nil if there is none.
func (s *shard[V]) find(hash uint64, k Key) *entry[V] {
	if t := s.table.Load(); t != nil {
		for e := chain(*t, hash).Load(); e != nil; e = e.next.Load() {
			if e.key.Host == k.Host && sameScheme(e.key.Scheme, k.Scheme) {
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

// GetIfRoom returns the value of k, making it if it is missing and the map
// has room for it without evicting another: for the hosts of successful
// requests, so that a client calling more hosts than the map holds does not
// churn through it (and allocate) on every success.
func (h *Map[V]) GetIfRoom(k Key) (V, bool) {
	if v, ok := h.Get(k); ok || h.total.Load() >= h.maxHosts {
		return v, ok
	}
	return h.GetOrCreate(k), true
}

// GetOrCreate returns the value of k, making it if it is missing.
func (h *Map[V]) GetOrCreate(k Key) V {
	if v, ok := h.Get(k); ok {
		return v
	}
	hash, s := h.locate(k)
	return h.create(hash, s, k)
}

// create is GetOrCreate for a host that was missing a moment ago.
func (h *Map[V]) create(hash uint64, s *shard[V], k Key) V {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.get(hash, k); ok {
		return v
	}
	t := s.table.Load()
	if t == nil {
		made := make([]atomic.Pointer[entry[V]], h.chains)
		t = &made
		s.table.Store(t)
	}
	if h.total.Load() < h.maxHosts || s.n == 0 || !s.evict(*t, hash) {
		h.total.Add(1) // else one out, one in: the total stays
	}
	e := &entry[V]{key: k.clone()}
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
func (s *shard[V]) evict(t []atomic.Pointer[entry[V]], from uint64) bool {
	var victim *entry[V]
	var victimChain *atomic.Pointer[entry[V]]
	seen := 0
	start := int(from>>32) & (len(t) - 1)
scan:
	for i := range t {
		c := &t[(start+i)&(len(t)-1)]
		for e := c.Load(); e != nil; e = e.next.Load() {
			if e.value.Busy() {
				continue
			}
			idle := e.value.Idle()
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
func (s *shard[V]) unlink(head *atomic.Pointer[entry[V]], e *entry[V]) {
	for link := head; link.Load() != nil; link = &link.Load().next {
		if link.Load() == e {
			e.gone.Store(true)
			link.Store(e.next.Load())
			s.n--
			return
		}
	}
}

// Each calls fn with every entry until fn returns false. It takes no lock:
// it walks each shard's chains as they are when reached, so a host added or
// evicted meanwhile may be seen or not.
func (h *Map[V]) Each(fn func(Key, V) bool) {
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
