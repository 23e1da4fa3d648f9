package retryafter_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/retryafter"
)

// TestParse: retry-after-ms wins over Retry-After; seconds may have fractions; a date is read at
// now, one past being no wait; anything longer than a day (however long) is a day; a malformed
// or negative value (or "Inf" written out) asks for nothing.
func TestParse(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	huge := "1" + strings.Repeat("0", 400) // beyond a float64's range
	for _, tc := range []struct {
		header map[string]string
		want   time.Duration
		ok     bool
	}{
		{map[string]string{}, 0, false},
		{map[string]string{"Retry-After": "7"}, 7 * time.Second, true},
		{map[string]string{"Retry-After": " 1.5 "}, 1500 * time.Millisecond, true},
		{map[string]string{"retry-after-ms": "250", "Retry-After": "7"}, 250 * time.Millisecond, true},
		{map[string]string{"retry-after-ms": "soon", "Retry-After": "7"}, 7 * time.Second, true},
		{map[string]string{"Retry-After": now.Add(time.Minute).Format(http.TimeFormat)}, time.Minute,
			true},
		{map[string]string{"Retry-After": now.Add(-time.Minute).Format(http.TimeFormat)}, 0, true},
		{map[string]string{"Retry-After": "Fri, 31 Dec 9999 23:59:59 GMT"}, retryafter.Max, true},
		{map[string]string{"Retry-After": "1e12"}, retryafter.Max, true},
		{map[string]string{"Retry-After": huge}, retryafter.Max, true},
		{map[string]string{"retry-after-ms": huge}, retryafter.Max, true},
		{map[string]string{"Retry-After": "Inf"}, 0, false},
		{map[string]string{"Retry-After": "-5"}, 0, false},
		{map[string]string{"Retry-After": "NaN"}, 0, false},
		{map[string]string{"Retry-After": "soon"}, 0, false},
	} {
		h := http.Header{}
		for k, v := range tc.header {
			h.Set(k, v)
		}
		if got, ok := retryafter.Parse(h, now); got != tc.want || ok != tc.ok {
			t.Errorf("%v: %v, %v; want %v, %v", tc.header, got, ok, tc.want, tc.ok)
		}
	}
}
