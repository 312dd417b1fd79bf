// Package retryhttp provides an [http.RoundTripper] that retries failed
// requests, right by default, so that a program gets safe retries by setting
// one field:
//
//	client := &http.Client{
//		Transport: retryhttp.New(),  // up to 3 retries, only when safe
//		Timeout:   30 * time.Second, // bounds all attempts and waits together
//	}
//	res, err := client.Get("https://example.com/")
//
// The package's example (under Examples below) runs that against a local
// server that fails once; the [README]'s quick start is the same as a
// complete program to paste.
//
// Why a RoundTripper: the code that makes requests does not change, and every
// request of the client, including those of libraries it is handed to, gets
// the same policy.
//
// # What is retried, and how long it waits
//
// By default ([DefaultShouldRetryFn]): failures that prove the request never
// left the client (DNS errors, refused connections) always; timeouts and
// connection resets only for requests guessed idempotent; 429, or an error
// response carrying Retry-After; 502 and 503 for requests guessed idempotent;
// nothing else. The wait ([DefaultDelayFn]) follows Retry-After with ±1/3
// jitter, or a rate-limit reset header, or else "full jitter" exponential
// backoff from 250ms (1s for a 429 that states no wait), capped at 10s.
// Both are replaceable per transport ([WithShouldRetryFn],
// [WithDelayFn]), per class of request ([WithPolicyFunc], a [Policy] per
// request; package destinations: a policy per host, wildcard or matcher,
// from Go or a JSON file, reloadable while requests run) and per request
// through the context ([SetOptions]). A context's option beats the policy,
// which beats the transport's option. Every option and its default: [options];
// every way a request can end, and what the caller gets then: [default].
//
// What it never does: modify the caller's request, copy a body it can
// replay with GetBody, buffer an unbounded body, wait past the caller's
// deadline, retry after the caller cancelled, or return a response together
// with an error.
//
// # Retry storms
//
// A retry budget per destination host is on by default and shared by the
// process's Transports ([RetryBudget]). It limits the retries that fail, not
// those that succeed: a retry that succeeds gives its token back, and one
// without a token is sent all the same to a host that answers and shows no
// sign that load hurts it, so a host failing a share of its requests at
// random gets its retries as without a budget; where the host is short of
// room (it asked to back off, or load hurts it), a retry without a token
// waits for one, and the retries that fail are held to about
// [DefaultRetryBudgetRatio] per request the host answers. The retry of a
// response that asked for a pause (a 429, a Retry-After) takes no token: it
// waits the pause, then leaves through the host's pause lane at the pace
// the host accepts. In an outage, a retry is parked, token or not, until
// the host answers again, and released at the pace of the host's own
// traffic, so a short outage is ridden out while a dead backend sees about
// 1.0× its callers' requests instead of 4×. The price is waiting: a parked
// retry waits up to [DefaultMaxParkedWait] in all, or until its deadline,
// before failing, and a retry in the pause lane up to the maximum delay
// ([WithMaxDelay]) or its deadline, outage or not. A
// circuit breaker per host is available ([WithCircuitBreaker]), and so is
// hedging of idempotent requests ([WithHedging], [WithAdaptiveHedging]),
// whose hedges spend the same budget.
//
// Across a chain of services, the default policy honours the "don't retry"
// signal (Retry-Pushback: no-retry) of a failure already retried below: only
// the hop above a failure retries it. The inbound side of a service is
// package [github.com/seed2409de8f/retryhttp/inbound], which a client-only
// user never reads: the middleware that sends that signal (Pushback), the
// one that refuses the excess load with a 503 the hop above may retry
// (LoadShedder), and the one that bounds a handler by the caller's deadline
// (Deadline). The arithmetic and measurements: [storms] and [shedding].
//
// # Where it sits
//
// The Transport wraps a base transport ([WithTransport]), which sends each
// attempt. Instrumentation that should see every attempt (an otelhttp
// transport, say) goes below it, as its base; instrumentation that should
// see one logical request goes above it. Inside the Transport, the policies
// wrap each other in this order, outermost first: the circuit breaker (one
// sample per logical request, after its retries), the idempotency key (one
// per logical request), the retry loop or the hedged path, the retry budget
// (asked before each retry or hedge, and before a first attempt with
// [WithHoldDuringPause]), and the per-attempt timeout around each attempt.
//
// # Seeing what it did
//
// Hooks on every attempt, decision, wait in a host's queue (a parked retry,
// a pause lane's wait, a held first attempt) and change of a circuit
// ([WithHooks]), log/slog records of retries and give-ups ([WithLogger]), and
// OpenTelemetry metrics from the nested module [otelretryhttp]; all are off
// by default and free then. In tests, the package [retryhttptest] has
// servers that fail on cue and a clock that skips the waits. Details:
// [observability].
//
// [README]: https://github.com/seed2409de8f/retryhttp#quick-start
// [options]: https://github.com/seed2409de8f/retryhttp/blob/main/docs/options.md
// [default]: https://github.com/seed2409de8f/retryhttp/blob/main/docs/default.md#how-a-request-ends
// [storms]: https://github.com/seed2409de8f/retryhttp/blob/main/docs/storms.md
// [shedding]: https://github.com/seed2409de8f/retryhttp/blob/main/docs/shedding.md
// [observability]: https://github.com/seed2409de8f/retryhttp/blob/main/docs/observability.md
// [otelretryhttp]: https://pkg.go.dev/github.com/seed2409de8f/retryhttp/otelretryhttp
// [retryhttptest]: https://pkg.go.dev/github.com/seed2409de8f/retryhttp/retryhttptest
package retryhttp
