package retryhttp

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/google/uuid"
)

// Stacked retry layers. A client that retries by itself (the AWS SDK's
// retryer, resty with SetRetryCount) above this transport multiplies the
// attempts: each of its attempts is a first attempt here, retried in turn.
// Where the outer layer says, in a header, that a request is its retry,
// the transport treats that request as already retried above: it sends it
// once, with no retries of its own, as it does for a server's cross-hop
// signal (crosshop.go). And where the outer layer names the call that all
// its attempts belong to, an idempotency key the transport injects is
// derived from that name, so that all of them carry one key and a server
// can tell them for one. docs/integrations.md says which layer to turn off
// where no header tells.
//
// Only the AWS SDK for Go v2 says so today: every attempt carries
// "amz-sdk-request: attempt=N; max=M" and "amz-sdk-invocation-id: <UUID>",
// the same UUID on every attempt of one call. Both are read as the SDK sets
// them, under their canonical names, with Header.Set; a malformed value
// is ignored, as if no layer had said anything.

const (
	outerRequestHeader    = "Amz-Sdk-Request"       // attempt=N; max=M
	outerInvocationHeader = "Amz-Sdk-Invocation-Id" // one UUID per call
)

// maxOuterAttempt bounds the attempt numbers read from an outer layer's
// header: more digits than this are malformed.
const maxOuterAttempt = 1 << 20

// outerRetry reports whether v, the values of outerRequestHeader, say that
// its request is a retry by a layer above the transport: one value, whose
// attempt number is 2 or more.
func outerRetry(v []string) bool {
	return len(v) == 1 && outerAttempt(v[0]) > 1
}

// outerAttempt returns the attempt number of an amz-sdk-request value
// ("attempt=2; max=3"), or 0 if it has none or is malformed.
func outerAttempt(v string) int {
	if len(v) > 64 {
		return 0 // far longer than any the SDK sends
	}
	for _, field := range strings.Split(v, ";") {
		name, value, ok := strings.Cut(strings.TrimSpace(field), "=")
		if !ok || !strings.EqualFold(name, "attempt") {
			continue
		}
		n, err := strconv.Atoi(value)
		if err != nil || n < 1 || n > maxOuterAttempt {
			return 0
		}
		return n
	}
	return 0
}

// layered returns s, or, for a request that an outer layer retries (as its
// headers' facts f say), a copy of s without retries (made only then: such
// requests are rare).
func (s *settings) layered(f *headerFacts) *settings {
	if s.maxRetries == 0 || !f.outerRetry {
		return s
	}
	own := *s
	own.maxRetries = 0
	return &own
}

// keyFor returns the idempotency key to inject into req: the outer layer's
// name of the call, if it gives one that is a UUID in its usual 36-character
// form, so that every attempt of the call carries the same key; else a
// fresh random one (newKey).
func keyFor(req *http.Request) (uuid.UUID, error) {
	if v, ok := req.Header[outerInvocationHeader]; ok && len(v) == 1 && len(v[0]) == 36 {
		if id, err := uuid.Parse(v[0]); err == nil {
			return id, nil
		}
	}
	return newKey()
}
