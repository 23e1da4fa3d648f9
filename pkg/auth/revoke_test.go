package auth_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/auth"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"go.uber.org/goleak"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// TestHoldEndsTheCallsOfARevokedKey: the calls Hold holds, authenticated by a key of the
// followed file, end with ErrKeyRevoked (UNAUTHENTICATED saying so) within about the reload
// interval once the key is taken out of the file, with no other call to read it; the calls
// of a key that stays, of fixed keys and without a key go on. Holding calls starts one
// goroutine, not one per call, and it ends with the last call held.
func TestHoldEndsTheCallsOfARevokedKey(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	const every = 50 * time.Millisecond
	leaked, leakedHash := auth.NewKey()
	kept, keptHash := auth.NewKey()
	file := filepath.Join(t.TempDir(), "keys")
	write := func(hashes ...string) {
		t.Helper()
		text := ""
		for _, h := range hashes {
			text += h + "\n"
		}
		if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(leakedHash, keptHash)
	load := func() ([]auth.Key, error) {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		var keys []auth.Key
		for i, line := range strings.Fields(string(data)) {
			keys = append(keys, auth.Key{Hash: line, Principal: auth.Principal{User: fmt.Sprint("user", i)}})
		}
		return keys, nil
	}
	a, err := auth.FollowKeys(file, every, load, nil)
	if err != nil {
		t.Fatal(err)
	}
	hold := func(a *auth.Authenticator, key string) (context.Context, func()) {
		t.Helper()
		ctx := metadata.NewIncomingContext(t.Context(), metadata.Pairs("authorization", "Bearer "+key))
		p, err := a.Authenticate(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return a.Hold(auth.NewContext(ctx, p))
	}

	before := runtime.NumGoroutine()
	const calls = 50
	var leakedCalls, keptCalls []context.Context
	var releases []func()
	for range calls {
		ctx, release := hold(a, leaked)
		leakedCalls, releases = append(leakedCalls, ctx), append(releases, release)
		ctx, release = hold(a, kept)
		keptCalls, releases = append(keptCalls, ctx), append(releases, release)
	}
	if n := runtime.NumGoroutine() - before; n > 1 {
		t.Errorf("holding %d calls started %d goroutines, want at most one", 2*calls, n)
	}
	fixed, err := auth.New([]auth.Key{{Hash: leakedHash, Principal: auth.Principal{User: "alice"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	fixedCall, releaseFixed := hold(fixed, leaked)
	defer releaseFixed()

	write(keptHash)
	revoked := time.Now()
	for i, ctx := range leakedCalls {
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
			t.Fatalf("call %d of the revoked key still runs %v after the key was revoked", i, time.Since(revoked))
		}
		err := auth.RevokedError(ctx)
		if st := status.Convert(stageerr.ToStatus(err)); st.Code() != codes.Unauthenticated || st.Message() == "" {
			t.Fatalf("call %d of the revoked key ended with %v, want UNAUTHENTICATED saying so", i, err)
		}
	}
	if d := time.Since(revoked); d > 10*every {
		t.Errorf("the calls of the revoked key ended %v after, want about %v", d, every)
	}
	for i, ctx := range keptCalls {
		if ctx.Err() != nil {
			t.Errorf("call %d of the key kept ended: %v", i, context.Cause(ctx))
		}
	}
	if fixedCall.Err() != nil {
		t.Errorf("a call of fixed keys ended: %v", context.Cause(fixedCall))
	}

	// A call whose key was revoked after it was authenticated, before it was held, ends at
	// once.
	ctx := metadata.NewIncomingContext(t.Context(), metadata.Pairs("authorization", "Bearer "+kept))
	p, err := a.Authenticate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	write(leakedHash)
	time.Sleep(2 * every)
	late, releaseLate := a.Hold(auth.NewContext(ctx, p))
	releaseLate()
	if auth.RevokedError(late) == nil {
		t.Errorf("a call held after its key was revoked: %v, want it ended as revoked", context.Cause(late))
	}

	for _, release := range releases {
		release()
	}
	// goleak waits for the goroutine that reloads the keys to end.
}
