package retryhttp

// Composing retry conditions (CustomizedShouldRetryFnOptions'
// AdditionalStatusCodes and RetryIf) without losing the rules that always
// win. docs/compose.md explains the choices.

// compose returns p with extra statuses and an extra condition added.
func (p retryPolicy) compose(extraCodes []int, retryIf func(Attempt) bool) retryPolicy {
	if len(extraCodes) > 0 {
		codes := make([]int, 0, len(p.statusCodes)+len(extraCodes))
		p.statusCodes = append(append(codes, p.statusCodes...), extraCodes...)
	}
	p.retryIf = retryIf
	return p
}

// shouldRetryOrIf retries what the policy's rules retry, and otherwise asks
// retryIf, unless a rule that always wins forbids it or the request is not
// guessed idempotent.
func (p retryPolicy) shouldRetryOrIf(a Attempt) bool {
	if p.shouldRetry(a) {
		return true
	}
	return !neverRetried(a) && p.idempotent(a) && p.retryIf(a)
}

// neverRetried reports whether one of the rules that always win forbids
// retrying a: the caller gave up (stop.go), the response is an answer
// (below 400), or it carries the cross-hop signal that a server behind it
// already retried.
func neverRetried(a Attempt) bool {
	switch {
	case callerGone(a.Req):
		return true
	case a.Err != nil:
		return false
	case a.Res == nil:
		return true
	case answered(a.Res.StatusCode):
		return true
	}
	return !a.RetrySignalIgnored && HasRetrySignal(a.Res.Header)
}
