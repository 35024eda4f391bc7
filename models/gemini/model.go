package gemini

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"google.golang.org/adk/model"
	adkgemini "google.golang.org/adk/model/gemini"
	"google.golang.org/genai"

	"github.com/agent-worker/agent-worker/models/internal/wire"
	"github.com/agent-worker/agent-worker/models/retry"
)

// DefaultTimeout bounds one attempt when Options.Timeout is zero.
const DefaultTimeout = 10 * time.Minute

// Options configure a Model. Model is required, and either APIKey (the
// Gemini API, or Vertex AI express mode) or, with Vertex, Project.
type Options struct {
	// Model is the model name ("gemini-2.5-flash") and what Name reports.
	Model string
	// APIKey authenticates with the Gemini API (sent as x-goog-api-key).
	// With Vertex it selects Vertex AI express mode and excludes Project
	// and Location. It appears in no log line and no error.
	APIKey string
	// BaseURL replaces the API endpoint (tests, proxies); empty means
	// genai's default, which genai lets GOOGLE_GEMINI_BASE_URL or
	// GOOGLE_VERTEX_BASE_URL override.
	BaseURL string
	// Vertex selects Vertex AI instead of the Gemini API.
	Vertex bool
	// Project and Location are the Google Cloud project and region of
	// Vertex AI (Location empty means "global"). Without an APIKey, Vertex
	// authenticates with Application Default Credentials, unless
	// HTTPClient is set: then that client must authenticate itself.
	Project, Location string
	// Timeout bounds each attempt, retries excluded; 0 means
	// DefaultTimeout. When streaming it bounds the wait for the first
	// response only. An attempt that runs out is retried like a network
	// error.
	Timeout time.Duration
	// Retry is the retry policy (see package retry); its zero value makes
	// one attempt. When Retry.Log is nil, Log is used.
	Retry retry.Policy
	// Headers are added to every request. Their values are treated as
	// secrets too.
	Headers map[string]string
	// HTTPClient sends the requests; nil means a client with Go's default
	// transport. Its Transport is wrapped, never modified.
	HTTPClient *http.Client
	// Log receives the retry warnings; nil discards.
	Log *slog.Logger
	// Reasoning sets generationConfig.thinkingConfig.thinkingBudget on
	// every request that has no thinking config of its own: 1024, 4096 or
	// 16384 tokens for "low", "medium" or "high". "" sends none, leaving
	// the model's default (dynamic thinking on 2.5 models).
	Reasoning string
}

// Model is ADK's own Gemini model.LLM (google.golang.org/adk/model/gemini)
// with the retry policy, per-attempt timeout and secret hygiene every
// provider here shares. It is safe for concurrent use.
//
// Guarantees:
//   - Retries follow Options.Retry: 429, 5xx, network errors and attempts
//     that exceed Options.Timeout are retried, honouring Retry-After or
//     Google's RetryInfo retryDelay; any other 4xx fails at once with the
//     provider's message, e.g. "gemini: 400 Bad Request
//     (INVALID_ARGUMENT): <message>". An attempt is retried only if it
//     yielded nothing yet: a stream that fails midway fails the call.
//   - Cancelling the caller's context aborts the request in flight or the
//     backoff wait at once; the error wraps context.Canceled.
//   - Usage is genai's, as the API reported it: PromptTokenCount includes
//     cached tokens (CachedContentTokenCount), and thinking tokens are in
//     ThoughtsTokenCount, not in CandidatesTokenCount.
//
// ADK's Gemini-specific behaviour (built-in tools, output schemas, its
// request tweaks) is kept: the wrapper reports the same backend variant.
type Model struct {
	inner   model.LLM
	timeout time.Duration
	retry   retry.Policy
	secrets []string
	budget  int32 // thinkingBudget; 0: none set
}

var _ model.LLM = (*Model)(nil)

// New returns a Model for o. It makes no request to the model, but with
// Vertex and no APIKey or HTTPClient it looks up Application Default
// Credentials, which may read files or ask the metadata server, under ctx.
func New(ctx context.Context, o Options) (*Model, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	budget, err := wire.ThinkingBudget(o.Reasoning)
	if err != nil {
		return nil, fmt.Errorf("gemini: %w", err)
	}
	hc := wire.HTTPClient(o.HTTPClient)
	cc := &genai.ClientConfig{HTTPClient: hc, HTTPOptions: genai.HTTPOptions{BaseURL: o.BaseURL}}
	secrets := []string{}
	if o.APIKey != "" {
		cc.APIKey = o.APIKey
		secrets = append(secrets, o.APIKey)
	}
	if len(o.Headers) > 0 {
		cc.HTTPOptions.Headers = http.Header{}
		for k, v := range o.Headers {
			cc.HTTPOptions.Headers.Set(k, v)
		}
	}
	secrets = wire.HeaderSecrets(secrets, o.Headers)
	if o.Vertex {
		cc.Backend = genai.BackendVertexAI
		if o.APIKey == "" {
			cc.Project, cc.Location = o.Project, o.Location
			if o.HTTPClient == nil {
				if err := cc.UseDefaultCredentials(); err != nil {
					return nil, fmt.Errorf("gemini: vertex AI credentials: %w", err)
				}
			}
		}
	} else {
		cc.Backend = genai.BackendGeminiAPI
	}
	inner, err := adkgemini.NewModel(ctx, o.Model, cc)
	if err != nil {
		// genai's messages print the whole ClientConfig, key included.
		return nil, retry.Redact(fmt.Errorf("gemini: %w", err), secrets...)
	}

	return &Model{
		inner:   inner,
		timeout: wire.Timeout(o.Timeout, DefaultTimeout),
		retry:   wire.RetryPolicy(o.Retry, o.Log, "gemini", o.Model),
		secrets: secrets,
		budget:  int32(budget),
	}, nil
}

func (o Options) validate() error {
	switch {
	case strings.TrimSpace(o.Model) == "":
		return errors.New("gemini: no model name")
	case !o.Vertex && o.APIKey == "":
		return errors.New("gemini: the Gemini API needs an API key (or set vertex with a project)")
	case !o.Vertex && (o.Project != "" || o.Location != ""):
		return errors.New("gemini: project and location apply to Vertex AI only")
	case o.Vertex && o.APIKey != "" && (o.Project != "" || o.Location != ""):
		return errors.New("gemini: Vertex AI takes an API key (express mode) or a project and location, not both")
	case o.Vertex && o.APIKey == "" && o.Project == "":
		return errors.New("gemini: Vertex AI needs a project (or an API key for express mode)")
	}
	return nil
}

// Name returns Options.Model.
func (m *Model) Name() string { return m.inner.Name() }

// GetGoogleLLMVariant reports the backend (Gemini API or Vertex AI), as
// ADK's own Gemini model does; ADK adapts some requests to it.
func (m *Model) GetGoogleLLMVariant() genai.Backend {
	if v, ok := m.inner.(interface{ GetGoogleLLMVariant() genai.Backend }); ok {
		return v.GetGoogleLLMVariant()
	}
	return genai.BackendUnspecified
}

// GenerateContent calls ADK's Gemini model with the retry policy. Without
// stream it yields exactly one complete response or one error. With
// stream it yields ADK's partial and final responses as they come; a
// failure before the first is retried, a failure after it ends the call
// with that error. The work happens when the sequence is iterated.
func (m *Model) GenerateContent(ctx context.Context, req *model.LLMRequest, stream bool) iter.Seq2[*model.LLMResponse, error] {
	req = m.withThinking(req)
	if stream {
		return m.generateStream(ctx, req)
	}
	return func(yield func(*model.LLMResponse, error) bool) {
		yield(m.generate(ctx, req))
	}
}

// withThinking returns req with the model's thinking budget in its
// config, unless there is no budget or req has a thinking config of its
// own (an agent's planner). req itself is not changed.
func (m *Model) withThinking(req *model.LLMRequest) *model.LLMRequest {
	if m.budget == 0 || req == nil || (req.Config != nil && req.Config.ThinkingConfig != nil) {
		return req
	}
	r := *req
	cfg := genai.GenerateContentConfig{}
	if req.Config != nil {
		cfg = *req.Config
	}
	cfg.ThinkingConfig = &genai.ThinkingConfig{ThinkingBudget: genai.Ptr(m.budget)}
	r.Config = &cfg
	return &r
}

func (m *Model) generate(ctx context.Context, req *model.LLMRequest) (*model.LLMResponse, error) {
	var out *model.LLMResponse
	err := m.retry.Request(ctx, m.timeout, m.secrets, func(ctx context.Context, seen func() (retry.Response, bool)) error {
		out = nil
		for resp, err := range m.inner.GenerateContent(ctx, req, false) {
			if err != nil {
				return m.requestError(err, seen)
			}
			out = resp
		}
		if out == nil {
			return retry.Permanent(errors.New("gemini: no response"))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (m *Model) generateStream(ctx context.Context, req *model.LLMRequest) iter.Seq2[*model.LLMResponse, error] {
	return func(yield func(*model.LLMResponse, error) bool) {
		stopped := false
		err := m.retry.Do(ctx, func(ctx context.Context) error {
			actx, cancel := context.WithCancelCause(ctx)
			defer cancel(nil)
			// The limit covers the wait for the first response; after it
			// the consumer's own pace (and ctx) governs.
			timer := time.AfterFunc(m.timeout, func() { cancel(retry.ErrTimeout) })
			defer timer.Stop()
			actx, seen := retry.Record(actx)
			yielded := false
			for resp, err := range m.inner.GenerateContent(actx, req, true) {
				if err != nil {
					err = m.requestError(err, seen)
					if ctx.Err() == nil && context.Cause(actx) == retry.ErrTimeout {
						err = fmt.Errorf("%w after %s (%v)", retry.ErrTimeout, m.timeout, err)
					}
					if yielded {
						return retry.Permanent(err)
					}
					return err
				}
				if !yielded {
					timer.Stop()
					yielded = true
				}
				if !yield(resp, nil) {
					stopped = true
					return nil
				}
			}
			return nil
		})
		if err != nil && !stopped {
			yield(nil, retry.Redact(err, m.secrets...))
		}
	}
}

// requestError turns an error from ADK's Gemini model into ours: a
// *retry.StatusError when the server answered with an error status (message
// and status from the body, the wait from Retry-After or RetryInfo), else
// the error itself, with secrets removed either way.
func (m *Model) requestError(err error, seen func() (retry.Response, bool)) error {
	var apiErr genai.APIError
	isAPI := errors.As(err, &apiErr)
	r, ok := seen()
	switch {
	case ok && r.StatusCode >= 400:
		se := r.Error("gemini", m.secrets...)
		if se.RetryAfter == 0 && isAPI {
			se.RetryAfter = retryDelay(apiErr.Details)
		}
		if se.Message == "" && isAPI {
			se.Message = retry.RedactString(apiErr.Message, m.secrets...)
		}
		return se
	case isAPI && apiErr.Code >= 400:
		// A streamed error, or one the transport did not see.
		return &retry.StatusError{
			Provider:   "gemini",
			StatusCode: apiErr.Code,
			Type:       apiErr.Status,
			Message:    retry.RedactString(apiErr.Message, m.secrets...),
			RetryAfter: retryDelay(apiErr.Details),
		}
	}
	msg := strings.TrimPrefix(err.Error(), "failed to call model: ")
	return retry.Redact(&wrapped{msg: "gemini: " + msg, err: err}, m.secrets...)
}

// retryDelay reads google.rpc.RetryInfo's retryDelay ("2s", "0.5s") from
// an error's details; 0 when absent.
func retryDelay(details []map[string]any) time.Duration {
	for _, d := range details {
		if t, _ := d["@type"].(string); !strings.HasSuffix(t, "google.rpc.RetryInfo") {
			continue
		}
		if s, ok := d["retryDelay"].(string); ok {
			if v, err := time.ParseDuration(s); err == nil && v > 0 {
				return v
			}
		}
	}
	return 0
}

type wrapped struct {
	msg string
	err error
}

func (e *wrapped) Error() string { return e.msg }
func (e *wrapped) Unwrap() error { return e.err }
