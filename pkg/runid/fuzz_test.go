package runid_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/runid"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// runIDs is the rule Check keeps, spelled as a regular expression.
var runIDs = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// FuzzCheck: whatever the id, Check does not panic and takes exactly the ids of the rule (ASCII
// letters, digits, '_' and '-', 1 to 128 bytes); CheckField refuses the others but "" with
// INVALID_ARGUMENT naming the field, in a message of bounded length however long the id.
func FuzzCheck(f *testing.F) {
	for _, id := range []string{"", "run-1", "0b5c6f0e-2a4f-4d51-9a8e-2b8a8f8a0c1d", "a.b", "a*", "a>", "a b",
		"é", "run\x00", "\xff", strings.Repeat("r", 128), strings.Repeat("r", 129), "\u0660", "K"} {
		f.Add(id)
	}
	f.Fuzz(func(t *testing.T, id string) {
		err := runid.Check(id)
		if valid := runIDs.MatchString(id); valid != (err == nil) {
			t.Fatalf("Check(%q) = %v, want valid %v", id, err, valid)
		}
		err = runid.CheckField("run_id", id)
		if id == "" || err == nil {
			if id != "" && !runIDs.MatchString(id) {
				t.Fatalf("CheckField(%q) took it", id)
			}
			return
		}
		st := status.Convert(stageerr.ToStatus(err))
		if st.Code() != codes.InvalidArgument || !strings.HasPrefix(st.Message(), "run_id: ") {
			t.Fatalf("CheckField(%q) = %v, want INVALID_ARGUMENT naming run_id", id, err)
		}
		if n := len(st.Message()); n > 200+4*runid.MaxBytes {
			t.Fatalf("CheckField of a %d-byte id: a %d-byte message", len(id), n)
		}
	})
}
