package anthropic

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"net/http"
	"strings"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"google.golang.org/adk/model"

	"github.com/agent-worker/agent-worker/models/internal/wire"
	"github.com/agent-worker/agent-worker/models/retry"
)

const (
	// DefaultBaseURL is where requests go when Options.BaseURL is empty;
	// the SDK appends "v1/messages".
	DefaultBaseURL = "https://api.anthropic.com/"
	// APIVersion is the anthropic-version header sent with every request:
	// the version the Messages API reference documents. A Headers entry
	// for "anthropic-version" overrides it.
	APIVersion = "2023-06-01"
	// DefaultMaxTokens is max_tokens when neither Options.MaxTokens nor the
	// request's MaxOutputTokens sets it; the API requires a value.
	DefaultMaxTokens = 4096
	// DefaultTimeout bounds one attempt when Options.Timeout is zero.
	DefaultTimeout = 10 * time.Minute
)

// Options configure a Model. Model and APIKey are required.
type Options struct {
	// Model is the model name sent in every request
	// ("claude-sonnet-4-5", ...) and what Name reports.
	Model string
	// BaseURL is the API root that "v1/messages" is appended to; empty
	// means DefaultBaseURL. ANTHROPIC_BASE_URL is never read.
	BaseURL string
	// APIKey is sent as the x-api-key header. ANTHROPIC_API_KEY is never
	// read. The key appears in no log line and no error.
	APIKey string
	// Headers are added to every request (after x-api-key and
	// anthropic-version, so they can override them, e.g. anthropic-beta).
	// Their values are treated as secrets too.
	Headers map[string]string
	// MaxTokens is max_tokens for requests that do not set
	// MaxOutputTokens; 0 means DefaultMaxTokens.
	MaxTokens int
	// Timeout bounds each attempt, retries excluded; 0 means
	// DefaultTimeout. An attempt that runs out is retried like a network
	// error.
	Timeout time.Duration
	// Retry is the retry policy (see package retry); its zero value makes
	// one attempt. When Retry.Log is nil, Log is used.
	Retry retry.Policy
	// HTTPClient sends the requests; nil means a client with Go's default
	// transport. Its Transport is wrapped, never modified.
	HTTPClient *http.Client
	// Log receives the retry warnings; nil discards.
	Log *slog.Logger
	// Reasoning turns on extended thinking with a budget per level:
	// thinking {type: "enabled", budget_tokens: 1024 | 4096 | 16384} for
	// "low" | "medium" | "high". The budget is added to max_tokens, which
	// the API requires to exceed it, so MaxTokens keeps bounding the
	// answer itself. "" sends no thinking parameter.
	Reasoning string
}

// Model is an ADK model.LLM speaking Anthropic's Messages API with tool use.
// It is safe for concurrent use.
//
// Guarantees:
//   - Retries follow Options.Retry: 429, 5xx (529 "overloaded" included),
//     network errors and attempts that exceed Options.Timeout are retried
//     (Retry-After honoured); any other 4xx fails at once with the
//     provider's message, e.g. "anthropic: 400 Bad Request
//     (invalid_request_error): <message>". The SDK's own retries are off.
//   - Cancelling the caller's context aborts the request in flight or the
//     backoff wait at once; the error wraps context.Canceled.
//   - Every response carries the usage the server reported, cache reads
//     and writes included (see llmResponse in response.go).
//
// With Options.Reasoning, the thinking blocks of a response (redacted ones
// included) are kept as thought parts and sent back unchanged with the
// conversation, as the API requires within a tool-use loop; see
// messageParams for when a request goes without thinking.
//
// Not guaranteed: streaming, or sampling settings (temperature, top_p are
// not sent). GenerateContent always makes one non-streamed request and
// yields one complete response, also when stream is true.
type Model struct {
	name      string
	messages  sdk.MessageService
	maxTokens int64
	budget    int64 // thinking budget_tokens; 0: no thinking
	timeout   time.Duration
	retry     retry.Policy
	secrets   []string
}

var _ model.LLM = (*Model)(nil)

// New returns a Model for o. It makes no request.
func New(o Options) (*Model, error) {
	if strings.TrimSpace(o.Model) == "" {
		return nil, errors.New("anthropic: no model name")
	}
	if o.APIKey == "" {
		return nil, errors.New("anthropic: no API key")
	}
	budget, err := wire.ThinkingBudget(o.Reasoning)
	if err != nil {
		return nil, fmt.Errorf("anthropic: %w", err)
	}
	base, err := wire.BaseURL("anthropic", o.BaseURL, DefaultBaseURL)
	if err != nil {
		return nil, err
	}
	hc := wire.HTTPClient(o.HTTPClient)
	timeout := wire.Timeout(o.Timeout, DefaultTimeout)
	opts := []option.RequestOption{
		// Read nothing from the environment (ANTHROPIC_API_KEY,
		// ANTHROPIC_BASE_URL, profiles): configuration is explicit.
		option.WithoutEnvironmentDefaults(),
		option.WithBaseURL(base),
		option.WithHTTPClient(hc),
		option.WithMaxRetries(0), // ours apply
		// The SDK's own per-request limit, set past ours so that ours
		// decides (and so that large max_tokens are not refused as
		// "streaming required").
		option.WithRequestTimeout(timeout + time.Minute),
		// The documented authentication header. (WithAPIKey in this SDK
		// version sends "Authorization: Bearer" instead.)
		option.WithHeader("x-api-key", o.APIKey),
		option.WithHeader("anthropic-version", APIVersion),
	}
	for k, v := range o.Headers {
		opts = append(opts, option.WithHeader(k, v))
	}
	secrets := wire.HeaderSecrets([]string{o.APIKey}, o.Headers)
	maxTokens := int64(o.MaxTokens)
	if maxTokens <= 0 {
		maxTokens = DefaultMaxTokens
	}
	pol := wire.RetryPolicy(o.Retry, o.Log, "anthropic", o.Model)
	client := sdk.NewClient(opts...)
	return &Model{
		name:      o.Model,
		messages:  client.Messages,
		maxTokens: maxTokens,
		budget:    int64(budget),
		timeout:   timeout,
		retry:     pol,
		secrets:   secrets,
	}, nil
}

// Name returns Options.Model.
func (m *Model) Name() string { return m.name }

// GenerateContent sends req as one Messages API request (retried per the
// policy) and yields exactly one complete response or one error. req.Model,
// when set, overrides the model name. The work happens when the sequence is
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
	params, err := messageParams(name, m.maxTokens, m.budget, req)
	if err != nil {
		return nil, fmt.Errorf("anthropic: build request: %w", err)
	}
	var out *model.LLMResponse
	err = m.retry.Request(ctx, m.timeout, m.secrets, func(ctx context.Context, seen func() (retry.Response, bool)) error {
		msg, err := m.messages.New(ctx, params)
		if err != nil {
			return m.requestError(err, seen)
		}
		resp, err := llmResponse(msg)
		if err != nil {
			return retry.Permanent(fmt.Errorf("anthropic: %w", err))
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
// server answered with an error status (its message and type taken from
// the body), else the transport error, with secrets removed either way.
// The SDK's own error text is not used: it includes the request URL.
func (m *Model) requestError(err error, seen func() (retry.Response, bool)) error {
	if r, ok := seen(); ok && r.StatusCode >= 400 {
		se := r.Error("anthropic", m.secrets...)
		var apiErr *sdk.Error
		if se.Message == "" && errors.As(err, &apiErr) && apiErr.Message != "" {
			se.Message = retry.RedactString(apiErr.Message, m.secrets...)
		}
		return se
	}
	return retry.Redact(fmt.Errorf("anthropic: %w", err), m.secrets...)
}
