package stagetest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"unicode"

	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ProviderName is the provider through which a generation stage reaches the kit's scripted
// provider (Options.ProviderAddr): an OpenAI-compatible provider whose base URL is
// http://ProviderAddr/v1.
const ProviderName = "stagekit"

// providerTarget is the target of the provider cases.
var providerTarget = &typev1.Target{Provider: ProviderName, Model: "stagekit-model"}

// Options are what some cases need besides the stage's address.
type Options struct {
	// ProviderAddr, when set (HOST:PORT), is where the kit serves a scripted OpenAI-compatible
	// provider that answers or fails as each of the generation table's provider cases asks,
	// over plain HTTP. The generation stage must have a provider named ProviderName, of the
	// OpenAI type, whose base URL is http://ProviderAddr/v1 (any API key). The generation
	// table then checks how the stage classifies its provider's failures, on which the
	// recovery stage decides. Unset, those cases are left out.
	ProviderAddr string
}

// providerFailure is a provider case's failure: what the scripted provider answers (an
// llmtest failure kind, with the delay a rate limit advertises) and the class the stage must
// give it.
type providerFailure struct {
	name         string
	answer       string
	kind         string
	retryAfterMS int
	class        typev1.ErrorClass
}

// providerFailures are the failures the provider cases make the provider answer with. A
// provider's time-out is not among them: when the stage gives up on its provider is the
// deployment's setting.
var providerFailures = []providerFailure{
	{"provider-rate-limited", "429 with Retry-After: 2 and retry-after-ms: 2000", llmtest.FailRateLimit, 2000, typev1.ErrorClass_ERROR_CLASS_RATE_LIMITED},
	{"provider-quota", "429 insufficient_quota", llmtest.FailQuotaExceeded, 0, typev1.ErrorClass_ERROR_CLASS_QUOTA},
	{"provider-auth", "401 invalid_api_key", llmtest.FailAuthError, 0, typev1.ErrorClass_ERROR_CLASS_AUTH},
	{"provider-bad-request", "400 invalid_request_error", llmtest.FailBadRequest, 0, typev1.ErrorClass_ERROR_CLASS_INVALID_REQUEST},
	{"provider-context-overflow", "400 context_length_exceeded", llmtest.FailContextLength, 0, typev1.ErrorClass_ERROR_CLASS_CONTEXT_OVERFLOW},
	serverError,
	{"provider-overloaded", "503 overloaded", llmtest.FailOverloaded, 0, typev1.ErrorClass_ERROR_CLASS_SERVER},
	{"provider-bad-response", "200 with a body that is not the API's JSON", llmtest.FailInvalidResponse, 0, typev1.ErrorClass_ERROR_CLASS_BAD_RESPONSE},
	{"provider-dropped-connection", "the connection closed before any answer", llmtest.FailNetworkError, 0, typev1.ErrorClass_ERROR_CLASS_NETWORK},
}

// serverError is the provider's 500, which a stream's case asks for too.
var serverError = providerFailure{"provider-server-error", "500 server_error", llmtest.FailModelError, 0, typev1.ErrorClass_ERROR_CLASS_SERVER}

// providerAnswer is what the scripted provider answers the provider-answer case.
const providerAnswer = "Hello from the conformance kit."

// providerMessage is the user message whose request the scripted provider answers as case name
// asks.
func providerMessage(name string) string { return "stagekit " + name }

// providerScenarios are the scripted provider's answers: an answer for provider-answer, and
// for each failure case the failure on every attempt (a stage may retry its provider).
func providerScenarios() []llmtest.Scenario {
	out := []llmtest.Scenario{{Name: "provider-answer", Match: providerMessage("provider-answer"), Turns: []llmtest.Turn{{Content: providerAnswer}}}}
	for _, f := range providerFailures {
		out = append(out, llmtest.Scenario{Name: f.name, Match: providerMessage(f.name),
			Turns: []llmtest.Turn{{Failure: f.kind, RetryAfterMS: f.retryAfterMS}}})
	}
	return out
}

// providerCases are the generation table's cases that need the kit's provider.
func providerCases() []testCase {
	cases := []testCase{{"provider-answer", fmt.Sprintf("target %s/%s reaches the kit's scripted provider (provider %q, base URL http://PROVIDER_ADDR/v1) and answers with its message", ProviderName, providerTarget.GetModel(), ProviderName),
		func(ctx context.Context, k *kit) error {
			resp, err := k.askProvider(ctx, "provider-answer")
			if err != nil {
				if se := stageerr.FromError(err); se.Code == typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT {
					return fmt.Errorf("%w: is the stage's provider %q configured, of the OpenAI type with base URL http://PROVIDER_ADDR/v1?", wantOK(err), ProviderName)
				}
				return wantOK(err)
			}
			if resp.GetContent() != providerAnswer {
				return fmt.Errorf("answered %q, want the provider's %q", resp.GetContent(), providerAnswer)
			}
			return nil
		}}}
	for _, f := range providerFailures {
		cases = append(cases, testCase{f.name, f.requires(), func(ctx context.Context, k *kit) error {
			_, err := k.askProvider(ctx, f.name)
			return f.check(err)
		}})
	}
	return append(cases, testCase{serverError.name + "-stream", "the same 500 ends GenerateStream with " + serverError.expected(),
		func(ctx context.Context, k *kit) error {
			return serverError.check(k.streamProvider(ctx, serverError.name))
		}})
}

// requires is what the case of f requires, for the table.
func (f providerFailure) requires() string {
	return fmt.Sprintf("the provider answering %s is %s", f.answer, f.expected())
}

// expected is the error the stage must answer f with.
func (f providerFailure) expected() string {
	failed := typev1.StageErrorCode_STAGE_ERROR_CODE_GENERATION_FAILED
	want := fmt.Sprintf("%s with StageError %s, error_class %s", grpcName(stageerr.GRPCCode(failed, f.class)), stageerr.CodeName(failed), stageerr.ClassName(f.class))
	if f.retryAfterMS > 0 {
		want += fmt.Sprintf(", retry_after_ms %d", f.retryAfterMS)
	}
	return want
}

// check returns how err differs from the error the stage must answer f with: the code and
// StageError of a generation failure of f's class, and for a rate limit the delay the
// provider asked for.
func (f providerFailure) check(err error) error {
	failed := typev1.StageErrorCode_STAGE_ERROR_CODE_GENERATION_FAILED
	if err := wantFailure(err, stageerr.GRPCCode(failed, f.class), failed); err != nil {
		return err
	}
	detail := stageErrorOf(err)
	var p problems
	if detail.GetErrorClass() != f.class {
		p.addf("error_class %s, want %s", stageerr.ClassName(detail.GetErrorClass()), stageerr.ClassName(f.class))
	}
	if f.retryAfterMS > 0 && detail.GetRetryAfterMs() != int64(f.retryAfterMS) {
		p.addf("retry_after_ms %d, want %d (the provider's Retry-After)", detail.GetRetryAfterMs(), f.retryAfterMS)
	}
	if p.err() != nil {
		return fmt.Errorf("%w (message %q)", p.err(), status.Convert(err).Message())
	}
	return nil
}

// grpcName is the name the gRPC specification gives c, e.g. RESOURCE_EXHAUSTED.
func grpcName(c codes.Code) string {
	var b strings.Builder
	lower := false
	for _, r := range c.String() {
		if unicode.IsUpper(r) && lower {
			b.WriteByte('_')
		}
		lower = unicode.IsLower(r)
		b.WriteRune(unicode.ToUpper(r))
	}
	return b.String()
}

// askProvider asks the stage, with Generate, for the answer of the provider case name.
func (k *kit) askProvider(ctx context.Context, name string) (*generationv1.GenerateResponse, error) {
	return generationv1.NewGenerationServiceClient(k.conn).Generate(ctx, providerRequest(k, name))
}

// streamProvider asks the stage, with GenerateStream, for the answer of the provider case name,
// and returns the error that ends the stream (nil when it ends with a final answer).
func (k *kit) streamProvider(ctx context.Context, name string) error {
	stream, err := generationv1.NewGenerationServiceClient(k.conn).GenerateStream(ctx, &generationv1.GenerateStreamRequest{Request: providerRequest(k, name)})
	if err != nil {
		return err
	}
	for {
		if _, err := stream.Recv(); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return err
		}
	}
}

// providerRequest is the request of the provider case name.
func providerRequest(k *kit, name string) *generationv1.GenerateRequest {
	return &generationv1.GenerateRequest{RunId: k.id("run"), Target: providerTarget,
		Messages: []*typev1.Message{{Role: typev1.Role_ROLE_USER, Content: providerMessage(name)}}}
}

// serveProvider serves the scripted provider at addr until the returned stop is called.
func serveProvider(addr string) (stop func(), err error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("the kit's provider cannot listen on %s: %w", addr, err)
	}
	p, err := llmtest.StartOn(l, providerScenarios()...)
	if err != nil {
		_ = l.Close()
		return nil, err
	}
	return p.Close, nil
}
