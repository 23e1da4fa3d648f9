package auth

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// followFile follows the one file of a new temporary directory, holding first, checked at
// every get (every is a nanosecond), with load reading it; it returns the value followed and
// the file's path.
func followFile(t testing.TB, first string, load func(file string) (*string, error)) (*followed[string], string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, []byte(first), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := follow("test file", []string{file}, time.Nanosecond, func() (*string, error) { return load(file) })
	if err != nil {
		t.Fatal(err)
	}
	return f, file
}

// readString reads file as a string.
func readString(file string) (*string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	s := string(data)
	return &s, nil
}

// TestFollowedGetWaitsForNoReload: while one caller of get loads the files again, the others
// go on with the current value at once, and take the new one when it is loaded. They waited
// on a mutex that every get took, also when the interval had not passed.
func TestFollowedGetWaitsForNoReload(t *testing.T) {
	loading, loaded := make(chan struct{}), make(chan struct{})
	first := true
	f, file := followFile(t, "old", func(file string) (*string, error) {
		if !first {
			close(loading)
			<-loaded
		}
		first = false
		return readString(file)
	})
	if err := os.WriteFile(file, []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	reloaded := make(chan *string)
	go func() { reloaded <- f.get() }()
	<-loading

	got := make(chan *string)
	go func() { got <- f.get() }()
	select {
	case v := <-got:
		if *v != "old" {
			t.Errorf("get during a reload: %q, want the current value %q", *v, "old")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("get waited for another caller's reload")
	}
	close(loaded)
	if v := <-reloaded; *v != "new" {
		t.Errorf("the caller that reloaded got %q, want %q", *v, "new")
	}
	if v := f.get(); *v != "new" {
		t.Errorf("get after the reload: %q, want %q", *v, "new")
	}
}

// BenchmarkFollowedGet measures get from every processor at once, as the authenticated calls
// of a busy server get their API keys: within the reload interval (the common path, which
// takes no lock), and when the interval has passed at every call (one caller reads the files,
// the others go on with the current value).
func BenchmarkFollowedGet(b *testing.B) {
	for _, bc := range []struct {
		name  string
		every time.Duration
	}{{"interval", time.Hour}, {"reloading", time.Nanosecond}} {
		b.Run(bc.name, func(b *testing.B) {
			f, _ := followFile(b, "keys", readString)
			f.every = bc.every
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if f.get() == nil {
						b.Fatal("no value")
					}
				}
			})
		})
	}
}
