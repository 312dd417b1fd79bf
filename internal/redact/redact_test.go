package redact

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRedactURLsIn(t *testing.T) {
	tests := []struct {
		give string
		want string
	}{
		{"no url here", "no url here"},
		{`Get "http://u:p@h:1/a/b?token=s#f": EOF`, `Get "http://h:1/a/b": EOF`},
		{`Post "https://u:***@h/p?q=a b c#frag": dial tcp: refused`, `Post "https://h/p": dial tcp: refused`},
		{"proxyconnect tcp via http://pu:pp@proxy:3128?x=1 failed", "proxyconnect tcp via http://proxy:3128 failed"},
		{"two: ws://h/x?a=1 and ftp://u@g/y#z.", "two: ws://h/x and ftp://g/y"},
		{"password with marks: http://u:p?a#s@h/x?q", "password with marks: http://h/x"},
		{"no scheme ://h/?q=1", "no scheme ://h/?q=1"},
		{"query at host http://h?q=s3cr3t end", "query at host http://h end"},
		{"", ""},
		{"trailing http://", "trailing http://"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, URLsIn(tt.give), "%q", tt.give)
	}
}
