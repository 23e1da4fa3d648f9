package memory

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// FuzzDecodePageToken: whatever the page_token a caller sends (ListMemories hands it to the
// memory stage unchanged), decodePageToken does not panic; a token it refuses is
// INVALID_ARGUMENT naming page_token, and one it takes names a memory id the stores can hold
// (not empty, at most MaxNameBytes, no NUL) and decodes again, encoded, to the same cursor.
func FuzzDecodePageToken(f *testing.F) {
	f.Add(encodePageToken(Cursor{CreatedAt: time.Unix(0, 1_700_000_000_000_000_000), ID: "0190c8b2-7e0a-7d3c-9a51-3a4c1f2b9e77"}))
	for _, raw := range []string{"", "x", "1|", "|id", "-5|id", "+5|id", "99999999999999999999|id", "1|a\x00b", "1|\xff",
		"1|" + strings.Repeat("m", MaxNameBytes+1), "1|a|b"} {
		f.Add(base64.RawURLEncoding.EncodeToString([]byte(raw)))
	}
	f.Add("!!not base64")
	f.Add("YQ==") // padded, which the raw encoding refuses
	f.Fuzz(func(t *testing.T, token string) {
		c, err := decodePageToken(token)
		if err != nil {
			st := status.Convert(stageerr.ToStatus(err))
			if st.Code() != codes.InvalidArgument || !strings.HasPrefix(st.Message(), "page_token ") {
				t.Fatalf("decodePageToken(%q) = %v, want INVALID_ARGUMENT naming page_token", token, err)
			}
			return
		}
		if c == nil {
			if token != "" {
				t.Fatalf("decodePageToken(%q): no cursor and no error", token)
			}
			return
		}
		if c.ID == "" || len(c.ID) > MaxNameBytes || strings.IndexByte(c.ID, 0) >= 0 {
			t.Fatalf("decodePageToken(%q) took memory id %q", token, c.ID)
		}
		again, err := decodePageToken(encodePageToken(*c))
		if err != nil || !again.CreatedAt.Equal(c.CreatedAt) || again.ID != c.ID {
			t.Fatalf("cursor %+v encodes to a token that decodes to %+v, %v", *c, again, err)
		}
	})
}
