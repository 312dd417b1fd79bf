package retryhttp

import (
	"hash/maphash"
	"net/http"
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
// maxHosts entries, busy ones aside. A host is found by one hash of its host[:port], which
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
	if h.total.Load() < h.maxHosts || t.n == 0 || !t.evict() {
		h.total.Add(1) // else one out, one in: the total stays
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
// first seen that is not busy (Go's map iteration order is random). It
// reports false, dropping nothing, when every entry is busy: the map then
// grows past maxHosts by the hosts with parked retries.
func (t *hostTable[V]) evict() bool {
	var victim hostKey
	var victimHash uint64
	found, seen := false, 0
scan:
	for hash, es := range t.byHash {
		for _, e := range es {
			if e.value.busy() {
				continue
			}
			if !found || e.value.idle() {
				victim, victimHash, found = e.key, hash, true
			}
			seen++
			if e.value.idle() || seen >= evictScan {
				break scan
			}
		}
	}
	if !found {
		return false
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
	return true
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

// each calls fn with every entry until fn returns false. It takes no lock:
// it reads each shard's table as it is when reached, so a host added or
// evicted meanwhile may be seen or not.
func (h *hostMap[V]) each(fn func(hostKey, V) bool) {
	for i := range h.shards {
		t := h.shards[i].table.Load()
		if t == nil {
			continue
		}
		for _, es := range t.byHash {
			for _, e := range es {
				if !fn(e.key, e.value) {
					return
				}
			}
		}
	}
}
