// Package retryafter reads how long an HTTP answer asks its client to wait before sending the
// request again: the generation stage's providers and the action stage's REST tools read it
// alike.
package retryafter

import (
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Max is the longest wait Parse returns: a longer one (or one too long for a time.Duration,
// however many digits it has) is taken as this, so that it never overflows into a negative wait
// that reads as none.
const Max = 24 * time.Hour

// Parse reads the wait h asks for at now: retry-after-ms (milliseconds, which OpenAI-compatible
// APIs send), else Retry-After (RFC 9110 §10.2.3) in seconds, fractions accepted, or as an
// HTTP date, one past being no wait; at most Max. It reports false when h asks for none: both
// headers missing or malformed.
func Parse(h http.Header, now time.Time) (time.Duration, bool) {
	if v := strings.TrimSpace(h.Get("retry-after-ms")); v != "" {
		if ms, ok := number(v); ok {
			return capped(ms * float64(time.Millisecond)), true
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if secs, ok := number(v); ok {
		return capped(secs * float64(time.Second)), true
	}
	if at, err := http.ParseTime(v); err == nil {
		return min(max(at.Sub(now), 0), Max), true
	}
	return 0, false
}

// number parses a wait's non-negative number: one beyond a float64's range is +Inf, but "Inf"
// written out is no number.
func number(v string) (float64, bool) {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) || err == nil && math.IsInf(f, 0) {
		return 0, false
	}
	return f, f >= 0 // false for NaN too
}

// capped converts nanoseconds to a duration of at most Max, comparing before converting: a
// float beyond int64 (or +Inf) converts to an undefined (on amd64 negative) value.
func capped(ns float64) time.Duration {
	if ns >= float64(Max) {
		return Max
	}
	return time.Duration(ns)
}
