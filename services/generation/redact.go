package generation

import "strings"

// credentialWords are the words of the names of headers that carry credentials, lower case:
// Authorization and Proxy-Authorization, x-api-key, Azure's api-key, gateways' tokens and
// subscription keys, cookies.
var credentialWords = []string{"auth", "key", "token", "secret", "password", "cookie", "credential", "signature"}

// credentials are the secrets of an endpoint, which no failure may quote: the API key, and
// the value of every configured header whose name says it carries a credential
// (credentialWords), whole and, for a value with an authentication scheme ("Bearer <token>"),
// the token after it, which a provider may echo alone. Other headers (X-Title, anthropic-beta)
// are quoted as they are.
func credentials(apiKey string, headers map[string]string) []string {
	var out []string
	if apiKey != "" {
		out = append(out, apiKey)
	}
	for name, value := range headers {
		value = strings.TrimSpace(value)
		if value == "" || !isCredentialHeader(name) {
			continue
		}
		out = append(out, value)
		if _, token, ok := strings.Cut(value, " "); ok && strings.TrimSpace(token) != "" {
			out = append(out, strings.TrimSpace(token))
		}
	}
	return out
}

// isCredentialHeader reports whether a header's name says it carries a credential.
func isCredentialHeader(name string) bool {
	name = strings.ToLower(name)
	for _, w := range credentialWords {
		if strings.Contains(name, w) {
			return true
		}
	}
	return false
}

// redact removes the endpoint's secrets (credentials) from text, the whole of a value before
// the token within it.
func (e *endpoint) redact(text string) string {
	for _, s := range e.secrets {
		text = strings.ReplaceAll(text, s, "[redacted]")
	}
	return text
}
