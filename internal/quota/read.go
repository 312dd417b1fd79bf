// Package quota reads the quotas that servers advertise on their responses
// (the IETF RateLimit fields in all their generations, and the vendor
// forms) and paces requests to them: a scope whose remaining quota is spent
// holds its requests until its window turns. Its functions are pure: the
// time is passed in, and it starts no goroutine and arms no timer; package
// retryhttp waits. docs/ratelimit.md ("Advertised quotas") states the
// rules and the reasons.
package quota

import (
	"net/http"
	"time"
)

// Observation is one quota as one response states it, normalised across
// the dialects.
type Observation struct {
	// Policy is the name the server gives the quota: the IETF policy name
	// (with its partition key, "name/pk"), GitHub's X-RateLimit-Resource,
	// "requests" for the LLM APIs' fields; "" when it names none.
	Policy string

	// Remaining is the quota left (r). It is no guarantee: the server may
	// refuse sooner.
	Remaining int64

	// Reset is the time, from the response's arrival, in which the
	// window turns (t); meaningful only if HasReset.
	Reset    time.Duration
	HasReset bool

	// Fine: Reset was stated finer than in whole seconds (the LLM APIs'
	// durations); a reset in whole seconds may be up to a second off.
	Fine bool

	// Limit is the quota of a whole window (q), and Window the window's
	// length (w); zero when not stated.
	Limit  int64
	Window time.Duration

	// Routed: a vendor form, whose quota may cover only some of the
	// host's paths (GitHub's resources): it holds only the requests whose
	// route was answered with it (Book).
	Routed bool
}

// Dialects selects the forms Read reads.
type Dialects uint8

const (
	// IETF: RateLimit and RateLimit-Policy (draft-11's named policies, and
	// draft-07's dictionary), and RateLimit-Limit/-Remaining/-Reset
	// (drafts up to -06).
	IETF Dialects = 1 << iota
	// XRateLimit: X-RateLimit-Limit/-Remaining/-Reset (Envoy, GitHub with
	// X-RateLimit-Resource, many others).
	XRateLimit
	// LLM: x-ratelimit-limit-requests, x-ratelimit-remaining-requests and
	// x-ratelimit-reset-requests (a Go-like duration: 6m0s, 20ms).
	LLM
)

// Bounds on what a field may state; a value past them is malformed.
const (
	// maxReset is the longest reset read: a daily quota's window, with a
	// day's margin. An epoch decades ahead, or a misread millisecond
	// epoch, is beyond it and ignored.
	maxReset = 48 * time.Hour
	// maxCount bounds remaining and limit counts.
	maxCount = 1 << 40
	// epochThreshold separates the two meanings of a legacy reset: at
	// least 10^9 is a Unix time in seconds, below it seconds to wait (as
	// internal/retryafter reads it).
	epochThreshold = 1_000_000_000
	// maxName bounds the length of a quota's name, partition key
	// included: it becomes a key of the pacing state.
	maxName = 128
)

// Advertised reports whether h may state a quota: whether it has a field
// without which Read reads none (RateLimit, RateLimit-Remaining,
// X-RateLimit-Remaining, x-ratelimit-remaining-requests). Four lookups
// cost less than Read's for a response that states none, the common case.
func Advertised(h http.Header) bool {
	return len(h["Ratelimit"]) > 0 || len(h["Ratelimit-Remaining"]) > 0 ||
		len(h["X-Ratelimit-Remaining"]) > 0 || len(h["X-Ratelimit-Remaining-Requests"]) > 0
}

// Read returns the quotas that h, the header of a response that arrived
// at now, states in the dialects d: the first of IETF, XRateLimit, LLM (in
// that order) that h carries validly. It returns none for a cached
// response (one with an Age header: its numbers are old), and at most
// maxMembers. retryAfter is the response's Retry-After, if any: it wins
// over the fields' reset for the quotas with none left.
func Read(h http.Header, now time.Time, d Dialects, retryAfter time.Duration, hasRetryAfter bool) []Observation {
	if len(h) == 0 || len(h["Age"]) > 0 {
		return nil
	}
	var obs []Observation
	if d&IETF != 0 {
		obs = readIETF(h)
		if obs == nil {
			obs = readLegacy(h, "Ratelimit-", now, false)
		}
	}
	if obs == nil && d&XRateLimit != 0 {
		obs = readLegacy(h, "X-Ratelimit-", now, true)
	}
	if obs == nil && d&LLM != 0 {
		obs = readLLM(h)
	}
	if hasRetryAfter && retryAfter >= 0 && retryAfter <= maxReset {
		for i := range obs {
			if obs[i].Remaining == 0 {
				obs[i].Reset, obs[i].HasReset, obs[i].Fine = retryAfter, true, false
			}
		}
	}
	return obs
}

// readIETF reads RateLimit: draft-11's list of named policies, with the
// quota and window of each from RateLimit-Policy, or else draft-07's
// dictionary.
func readIETF(h http.Header) []Observation {
	lines := h["Ratelimit"]
	if len(lines) == 0 {
		return nil
	}
	if ms, ok := parseList(lines); ok {
		return readDraft11(ms, h["Ratelimit-Policy"])
	}
	if ms, ok := parseDict(lines); ok {
		return readDraft07(ms, h["Ratelimit-Policy"])
	}
	return nil
}

// readDraft11 reads RateLimit's policies, ms: `"default";r=50;t=30`, with
// their q and w from RateLimit-Policy's policies of the same name and
// partition key. A policy whose quota unit (qu) is not requests is
// skipped: it counts bytes or concurrency, not requests.
func readDraft11(ms []sfMember, policyLines []string) []Observation {
	var policies []sfMember
	if len(policyLines) > 0 {
		policies, _ = parseList(policyLines) // invalid: no q or w known
	}
	var obs []Observation
	for i := range ms {
		m := &ms[i]
		name, ok := policyName(m)
		if !ok {
			continue
		}
		r, ok := m.intParam("r")
		if !ok {
			continue
		}
		o := Observation{Policy: name, Remaining: min(r, maxCount)}
		if t, ok := m.intParam("t"); ok && time.Duration(t) <= maxReset/time.Second {
			o.Reset, o.HasReset = time.Duration(t)*time.Second, true
		}
		unit := ""
		for j := range policies {
			if n, ok := policyName(&policies[j]); !ok || n != name {
				continue
			}
			p := &policies[j]
			if q, ok := p.intParam("q"); ok {
				o.Limit = min(q, maxCount)
			}
			if w, ok := p.intParam("w"); ok && time.Duration(w) <= maxReset/time.Second {
				o.Window = time.Duration(w) * time.Second
			}
			if qu, ok := p.param("qu"); ok {
				unit = qu.s
			}
			break
		}
		if unit != "" && unit != "requests" {
			continue
		}
		if !o.HasReset && o.Window > 0 && o.Remaining == 0 {
			o.Reset, o.HasReset = o.Window, true // at worst a window away
		}
		obs = append(obs, o)
	}
	return obs
}

// policyName returns the name of the policy m, with its partition key:
// "name" or "name/pk".
func policyName(m *sfMember) (string, bool) {
	if m.v.kind != sfString && m.v.kind != sfToken {
		return "", false
	}
	name := m.v.s
	if pk, ok := m.param("pk"); ok {
		if pk.kind != sfBytes && pk.kind != sfString && pk.kind != sfToken {
			return "", false
		}
		name += "/" + pk.s
	}
	return name, len(name) <= maxName
}

// readDraft07 reads draft-07's RateLimit dictionary, `limit=100,
// remaining=50, reset=5`, with the window from RateLimit-Policy's first
// policy (`100;w=10`).
func readDraft07(ms []sfMember, policyLines []string) []Observation {
	var o Observation
	has := false
	for i := range ms {
		m := &ms[i]
		if m.v.kind != sfInteger || m.v.n < 0 {
			continue
		}
		switch m.key {
		case "remaining":
			o.Remaining, has = min(m.v.n, maxCount), true
		case "limit":
			o.Limit = min(m.v.n, maxCount)
		case "reset":
			if time.Duration(m.v.n) <= maxReset/time.Second {
				o.Reset, o.HasReset = time.Duration(m.v.n)*time.Second, true
			}
		}
	}
	if !has {
		return nil
	}
	if policies, ok := parseList(policyLines); ok && len(policies) > 0 {
		if w, ok := policies[0].intParam("w"); ok && time.Duration(w) <= maxReset/time.Second {
			o.Window = time.Duration(w) * time.Second
		}
	}
	return []Observation{o}
}
