package openai

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"net/http"
	"strings"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"google.golang.org/adk/model"

	"github.com/agent-worker/agent-worker/models/internal/wire"
	"github.com/agent-worker/agent-worker/models/retry"
)

// DefaultBaseURL is where requests go when Options.BaseURL is empty.
const DefaultBaseURL = "https://api.openai.com/v1/"

// DefaultTimeout bounds one attempt when Options.Timeout is zero.
const DefaultTimeout = 10 * time.Minute

// Options configure a Model. Only Model is required.
type Options struct {
	// Model is the model name sent in every request ("gpt-4.1-mini",
	// "llama3.1:8b", ...) and what Name reports.
	Model string
	// BaseURL is the API root that "chat/completions" is appended to, e.g.
	// "http://localhost:11434/v1/" for Ollama or "http://vllm:8000/v1/".
	// Empty means DefaultBaseURL. The OPENAI_BASE_URL environment variable
	// is never read: configuration is explicit.
	BaseURL string
	// APIKey is sent as "Authorization: Bearer <key>". Empty sends no
	// Authorization header (local servers need none). OPENAI_API_KEY is
	// never read. The key appears in no log line and no error.
	APIKey string
	// Headers are added to every request (e.g. a proxy's routing or auth
	// header). Their values are treated as secrets too.
	Headers map[string]string
	// Timeout bounds each attempt, retries excluded; 0 means DefaultTimeout.
	// An attempt that runs out is retried like a network error.
	Timeout time.Duration
	// Retry is the retry policy (see package retry); its zero value makes
	// one attempt. When Retry.Log is nil, Log is used.
	Retry retry.Policy
	// HTTPClient sends the requests; nil means a client with Go's default
	// transport. Its Transport is wrapped, never modified.
	HTTPClient *http.Client
	// Log receives the retry warnings; nil discards.
	Log *slog.Logger
	// Reasoning is sent as reasoning_effort ("low", "medium" or "high")
	// with every request; "" sends none, leaving the server's default.
	// Only reasoning models accept it (o-series, gpt-5): others answer 400,
	// which fails the call at once.
	Reasoning string
}

// Model is an ADK model.LLM speaking the OpenAI Chat Completions API, so it
// works with OpenAI and with OpenAI-compatible servers (Ollama, vLLM,
// llama.cpp server, LiteLLM). It is safe for concurrent use.
//
// Guarantees:
//   - Retries follow Options.Retry: 429, 5xx, network errors and attempts
//     that exceed Options.Timeout are retried (Retry-After honoured); any
//     other 4xx fails at once with the provider's message, e.g.
//     "openai: 400 Bad Request (invalid_request_error): <message>". The
//     SDK's own retries are off.
//   - Cancelling the caller's context aborts the request in flight or the
//     backoff wait at once; the error wraps context.Canceled.
//   - Every response carries the usage the server reported (see llmResponse
//     in response.go for the mapping), never an estimate.
//
// Not guaranteed: streaming. GenerateContent always makes one non-streamed
// request and yields one complete response, also when stream is true.
type Model struct {
	name      string
	chat      oai.ChatCompletionService
	timeout   time.Duration
	retry     retry.Policy
	secrets   []string
	reasoning string
}

var _ model.LLM = (*Model)(nil)

// New returns a Model for o. It makes no request.
func New(o Options) (*Model, error) {
	if strings.TrimSpace(o.Model) == "" {
		return nil, errors.New("openai: no model name")
	}
	if _, err := wire.ThinkingBudget(o.Reasoning); err != nil {
		return nil, fmt.Errorf("openai: %w", err)
	}
	base, err := wire.BaseURL("openai", o.BaseURL, DefaultBaseURL)
	if err != nil {
		return nil, err
	}
	hc := wire.HTTPClient(o.HTTPClient)

	opts := []option.RequestOption{
		option.WithBaseURL(base),
		option.WithHTTPClient(hc),
		option.WithMaxRetries(0), // ours apply
	}
	secrets := []string{}
	if o.APIKey != "" {
		opts = append(opts, option.WithAPIKey(o.APIKey))
		secrets = append(secrets, o.APIKey)
	}
	for k, v := range o.Headers {
		opts = append(opts, option.WithHeader(k, v))
	}
	secrets = wire.HeaderSecrets(secrets, o.Headers)
	return &Model{
		name: o.Model,
		// NewChatCompletionService, unlike oai.NewClient, reads no
		// OPENAI_* environment variables.
		chat:      oai.NewChatCompletionService(opts...),
		timeout:   wire.Timeout(o.Timeout, DefaultTimeout),
		retry:     wire.RetryPolicy(o.Retry, o.Log, "openai", o.Model),
		secrets:   secrets,
		reasoning: o.Reasoning,
	}, nil
}

// Name returns Options.Model.
func (m *Model) Name() string { return m.name }

// GenerateContent sends req as one chat completion (retried per the policy)
// and yields exactly one complete response or one error. req.Model, when
// set, overrides the model name. The work happens when the sequence is
// iterated.
func (m *Model) GenerateContent(ctx context.Context, req *model.LLMRequest, stream bool) iter.Seq2[*model.LLMResponse, error] {
	return func(yield func(*model.LLMResponse, error) bool) {
		yield(m.generate(ctx, req))
	}
}

func (m *Model) generate(ctx context.Context, req *model.LLMRequest) (*model.LLMResponse, error) {
	name := m.name
	if req.Model != "" {
		name = req.Model
	}
	params, err := chatParams(name, m.reasoning, req)
	if err != nil {
		return nil, fmt.Errorf("openai: build request: %w", err)
	}
	var out *model.LLMResponse
	err = m.retry.Request(ctx, m.timeout, m.secrets, func(ctx context.Context, seen func() (retry.Response, bool)) error {
		completion, err := m.chat.New(ctx, params)
		if err != nil {
			return m.requestError(err, seen)
		}
		resp, err := llmResponse(completion)
		if err != nil {
			return retry.Permanent(fmt.Errorf("openai: %w", err))
		}
		out = resp
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// requestError turns an SDK error into ours: a *retry.StatusError when the
// server answered with an error status (its message taken from the body),
// else the transport error, with secrets removed either way.
func (m *Model) requestError(err error, seen func() (retry.Response, bool)) error {
	if r, ok := seen(); ok && r.StatusCode >= 400 {
		se := r.Error("openai", m.secrets...)
		var apiErr *oai.Error
		if se.Message == "" && errors.As(err, &apiErr) && apiErr.Message != "" {
			se.Message = retry.RedactString(apiErr.Message, m.secrets...)
		}
		return se
	}
	return retry.Redact(fmt.Errorf("openai: %w", err), m.secrets...)
}
