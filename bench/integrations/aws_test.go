package integrations

import (
	"context"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/seed2409de8f/retryhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// refusedURL is the address of a port nothing listens on: every connection
// to it is refused.
func refusedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return "http://" + addr
}

// sent records the attempts a transport sends: the AWS SDK's attempt header
// and the idempotency key of each.
type sent struct {
	mu    sync.Mutex
	outer []string
	keys  []string
}

func (s *sent) record(a retryhttp.AttemptInfo) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.outer = append(s.outer, a.Attempt.Req.Header.Get("amz-sdk-request"))
	s.keys = append(s.keys, retryhttp.IdempotencyKey(a.Attempt.Req))
}

func TestAWSRetriesNotMultiplied(t *testing.T) {
	// The AWS SDK's standard retryer (3 attempts) over the transport (3
	// retries) against a dead server: 4 attempts for the SDK's first, then
	// one for each of its retries, which say they are retries
	// (amz-sdk-request: attempt=2; max=3): 6, not 3 x 4 = 12. Every
	// attempt carries one idempotency key, the SDK's invocation ID.
	var s sent
	tr := retryhttp.New(ownBudget(), noDelay, retryhttp.WithHooks(retryhttp.Hooks{OnAttempt: s.record}))
	client := sqs.NewFromConfig(aws.Config{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""),
		HTTPClient:   &http.Client{Transport: tr},
		BaseEndpoint: aws.String(refusedURL(t)),
		Retryer: func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = 3
				o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
			})
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	_, err := client.ListQueues(ctx, &sqs.ListQueuesInput{})
	require.Error(t, err)

	s.mu.Lock()
	defer s.mu.Unlock()
	assert.Equal(t, []string{
		"attempt=1; max=3", "attempt=1; max=3", "attempt=1; max=3", "attempt=1; max=3",
		"attempt=2; max=3", "attempt=3; max=3",
	}, s.outer)
	require.NotEmpty(t, s.keys)
	assert.NotEmpty(t, s.keys[0], "a POST gets a key")
	for _, k := range s.keys {
		assert.Equal(t, s.keys[0], k, "one key for the whole call")
	}
}
