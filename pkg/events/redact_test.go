package events

import "testing"

// TestCredentialsOfEveryServerAreMasked: the credentials of each server of a NATS URL are
// masked, a password after its user and a token whole, as given and in a message quoting them.
func TestCredentialsOfEveryServerAreMasked(t *testing.T) {
	url := "nats://ann:pw1@a:4222, tls://tok3n@b:4222/x?y=1,c:4222"
	c := credentialsOf(url)
	want := "nats://ann:xxxxx@a:4222, tls://xxxxx@b:4222/x?y=1,c:4222"
	if got := c.from(url); got != want {
		t.Errorf("shown as %q, want %q", got, want)
	}
	msg, want := `parse "nats://ann:pw1@a:4222": bad`, `parse "nats://ann:xxxxx@a:4222": bad`
	if got := c.from(msg); got != want {
		t.Errorf("message %q, want %q", got, want)
	}
}
