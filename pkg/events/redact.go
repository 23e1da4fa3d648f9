package events

import "strings"

// masked takes the place of a credential in what is shown of a NATS URL.
const masked = "xxxxx"

// credentials hides the credentials a NATS URL carries (NATS_URL, nats.url): a server's
// user and password (nats://user:password@host) or token (nats://token@host), in each of the
// comma-separated servers of the URL. NATS has no other place for them, and the URL is shown
// in logs and in errors, which quote it as it was given.
type credentials struct {
	hide *strings.Replacer // each server's credentials, as given, with the '@' after them
}

// credentialsOf returns the credentials of the NATS URL url. It reads the URL as text: the
// URL of an error may be one that does not parse.
func credentialsOf(url string) credentials {
	var pairs []string
	for server := range strings.SplitSeq(url, ",") {
		if _, rest, ok := strings.Cut(server, "://"); ok {
			server = rest
		}
		if end := strings.IndexAny(server, "/?#"); end >= 0 {
			server = server[:end]
		}
		at := strings.LastIndex(server, "@")
		if at <= 0 {
			continue
		}
		info := server[:at]
		shown := masked // a token
		if user, _, ok := strings.Cut(info, ":"); ok {
			shown = user + ":" + masked
		}
		pairs = append(pairs, info+"@", shown+"@")
	}
	return credentials{hide: strings.NewReplacer(pairs...)}
}

// from returns text, a NATS URL or a message quoting it, with the credentials masked.
func (c credentials) from(text string) string { return c.hide.Replace(text) }

// hiddenError is an error whose message has credentials masked; it wraps the original, so
// errors.Is and errors.As still see it.
type hiddenError struct {
	msg string
	err error
}

func (e *hiddenError) Error() string { return e.msg }
func (e *hiddenError) Unwrap() error { return e.err }
