package retryhttp

import (
	"net/http"

	"github.com/seed2409de8f/retryhttp/internal/hop"
)

// "Is this outcome a failure?" Five parts of the transport ask it, and they
// do not all mean the same thing. The statuses two or more of them share
// have one definition here, answered and failedStatus; what each adds, and
// why, is listed below.
//
//	who (where)                  asks of                      a failure is
//	policy (shouldretry.go,      every attempt                an error, or a status of 400 or
//	  compose.go)                                             above (!answered): a candidate
//	                                                          for a retry, which its rules decide
//	stop reasons (stop.go        an outcome not retried       anything but a response that
//	  settled)                                                answered: StopSuccess, else
//	                                                          StopNotRetryable or StopCanceled
//	budget (budget.go settle,    every attempt                an error, failedStatus, or a 4xx
//	  success below)                                          carrying Retry-After
//	breaker (breaker.go sample)  a request's final outcome    an error, or failedStatus; not a
//	                                                          sample: a caller's cancellation,
//	                                                          a failure to read its body
//	Pushback (inbound/pushback)  a handler's status; an       failedStatus
//	                             outbound request's response
//
// Why they differ:
//   - The policy and the stop reasons ask "did the server answer?": a 404 is
//     an answer, neither retried nor a success of the server, but it is
//     still the outcome the caller asked for. Both read answered.
//   - The breaker and Pushback ask "did the server fail, or ask to be left
//     alone?": a 404 is the server working. Both read failedStatus, of the
//     request's last outcome: one sample per request, one status written.
//   - The budget asks the breaker's question of every attempt, and counts a
//     4xx with Retry-After as a failure too: that server asked for time,
//     and its answer must not refill the bucket that pays for retries.
//   - Errors: the policy classifies them (classify.go); the budget and
//     Pushback's outbound side count every error as a failure (a request
//     that ends on an error is a give-up or not retryable, and Pushback
//     reads the give-up from the StopReason); the breaker counts every error
//     but the caller's own (cancelled, or its body unreadable), which say
//     nothing about the server.

// answered reports whether a response with status code is an answer, not
// an error status: below 400. An answer is never retried, whatever its
// headers, and ends a request with StopSuccess.
func answered(code int) bool {
	return code < 400
}

// failedStatus reports whether a response with status code shows a server
// that failed or asks to be left alone: 429, or 500 and above. It fails a
// breaker's sample, and it is the failure that Pushback passes on.
func failedStatus(code int) bool {
	return hop.FailedStatus(code) // one definition, shared with package inbound
}

// success reports whether an attempt that ended with res shows a server
// that answers and does not ask to be left alone, for the retry budget: a
// response that is not failedStatus, and for 4xx without Retry-After.
func success(res *http.Response) bool {
	switch {
	case res == nil:
		return false
	case answered(res.StatusCode):
		return true // never failedStatus
	case failedStatus(res.StatusCode):
		return false
	}
	return res.Header.Get("Retry-After") == ""
}
