package gemini

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/adk/model"
	"google.golang.org/adk/session"
	"google.golang.org/genai"

	"github.com/agent-worker/agent-worker/guard"
	"github.com/agent-worker/agent-worker/models/internal/providersuite"
	"github.com/agent-worker/agent-worker/models/internal/providertest"
	"github.com/agent-worker/agent-worker/models/retry"
)

const testKey = "AIzaSyTEST0123456789abcdefSECRET"

const generatePath = "/v1beta/models/gemini-2.5-flash:generateContent"

// The bodies below follow the Gemini API reference
// (POST /v1beta/models/{model}:generateContent): a GenerateContentResponse
// with candidates and usageMetadata, and Google's error shape
// {"error": {"code", "message", "status", "details"}}.

const functionCallReply = `{
  "candidates": [{
    "content": {"parts": [{"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}}], "role": "model"},
    "finishReason": "STOP",
    "index": 0
  }],
  "usageMetadata": {"promptTokenCount": 95, "candidatesTokenCount": 16, "totalTokenCount": 111,
    "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 95}]},
  "modelVersion": "gemini-2.5-flash",
  "responseId": "x3Z2aK7KLe2FxN8P4bCQwQ8"
}`

const textReply = `{
  "candidates": [{
    "content": {"parts": [{"text": "It is 18°C and sunny in Paris."}], "role": "model"},
    "finishReason": "STOP",
    "index": 0
  }],
  "usageMetadata": {"promptTokenCount": 1200, "cachedContentTokenCount": 1024, "candidatesTokenCount": 200,
    "thoughtsTokenCount": 100, "totalTokenCount": 1500,
    "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 1200}],
    "cacheTokensDetails": [{"modality": "TEXT", "tokenCount": 1024}]},
  "modelVersion": "gemini-2.5-flash",
  "responseId": "y3Z2aK7KLe2FxN8P4bCQwQ9"
}`

func errorBody(code int, status, msg string, details ...map[string]any) string {
	e := map[string]any{"code": code, "message": msg, "status": status}
	if len(details) > 0 {
		e["details"] = details
	}
	b, _ := json.Marshal(map[string]any{"error": e})
	return string(b)
}

func newModel(ctx context.Context, url string, pol retry.Policy, log *slog.Logger) (model.LLM, error) {
	return New(ctx, Options{
		Model:   "gemini-2.5-flash",
		APIKey:  testKey,
		BaseURL: url,
		Headers: map[string]string{"X-Team": "payments"},
		Retry:   pol,
		Log:     log,
	})
}

// checkToolTurn checks the Gemini API side of the suite's tool turn:
// usage, the tools and system instruction of the requests, and the tool
// result going back as a functionResponse.
func checkToolTurn(t *testing.T, events []*session.Event, reqs []providertest.Received) {
	if u := events[2].UsageMetadata; u == nil || u.PromptTokenCount != 1200 || u.CachedContentTokenCount != 1024 {
		t.Errorf("final event usage = %+v", u)
	}

	wantTools := []any{map[string]any{"functionDeclarations": []any{map[string]any{
		"name":                 "get_weather",
		"description":          "Current weather for a city.",
		"parametersJsonSchema": providersuite.WeatherParameters(),
	}}}}
	for i, rq := range reqs {
		// ADK's Gemini model also declares the result's schema
		// (responseJsonSchema); the parameters are what matter here.
		gotTools := rq.Body["tools"]
		if decls, ok := dig(gotTools, 0, "functionDeclarations").([]any); ok && len(decls) == 1 {
			delete(decls[0].(map[string]any), "responseJsonSchema")
		}
		if !reflect.DeepEqual(gotTools, wantTools) {
			t.Errorf("request %d: tools =\n%s\nwant\n%s", i, providertest.JS(gotTools), providertest.JS(wantTools))
		}
		sys, _ := rq.Body["systemInstruction"].(map[string]any)
		if !strings.Contains(providertest.JS(sys), "You answer weather questions.") {
			t.Errorf("request %d: systemInstruction = %s", i, providertest.JS(sys))
		}
	}

	// The second request carries the exchange; the tool result goes back
	// as a functionResponse part of a user content.
	contents, _ := reqs[1].Body["contents"].([]any)
	if len(contents) != 3 {
		t.Fatalf("second request has %d contents, want 3:\n%s", len(contents), providertest.JS(contents))
	}
	wantContents := []any{
		map[string]any{"role": "user", "parts": []any{map[string]any{"text": "Weather in Paris?"}}},
		map[string]any{"role": "model", "parts": []any{map[string]any{"functionCall": map[string]any{"name": "get_weather", "args": map[string]any{"city": "Paris"}}}}},
		map[string]any{"role": "user", "parts": []any{map[string]any{"functionResponse": map[string]any{
			"name": "get_weather", "response": map[string]any{"condition": "sunny", "temp_c": float64(18)}}}}},
	}
	if !reflect.DeepEqual(contents, wantContents) {
		t.Errorf("second request contents =\n%s\nwant\n%s", providertest.JS(contents), providertest.JS(wantContents))
	}
}

// TestConformance runs the cases every provider shares on Gemini API
// replies.
func TestConformance(t *testing.T) {
	t.Parallel()
	quota := "You exceeded your current quota, please check your plan and billing details."
	serverError := "An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting"
	badRequest := `Invalid JSON payload received. Unknown name "foo": Cannot find field.`
	providersuite.Run(t, providersuite.Provider{
		New:        newModel,
		Key:        testKey,
		AuthHeader: "X-Goog-Api-Key",
		AuthValue:  testKey,
		OK:         providertest.Reply(200, textReply),
		Usage: providersuite.Usage{
			Want: genai.GenerateContentResponseUsageMetadata{
				PromptTokenCount:        1200,
				CachedContentTokenCount: 1024,
				CandidatesTokenCount:    200,
				ThoughtsTokenCount:      100,
				TotalTokenCount:         1500,
				PromptTokensDetails:     []*genai.ModalityTokenCount{{Modality: genai.MediaModalityText, TokenCount: 1200}},
				CacheTokensDetails:      []*genai.ModalityTokenCount{{Modality: genai.MediaModalityText, TokenCount: 1024}},
			},
			ModelVersion: "gemini-2.5-flash",
			Guard:        guard.Usage{Input: 1200, CachedInput: 1024, Output: 300},
			// At list price: $0.30 in, $0.075 cached, $2.50 out per million.
			Cost: (176*0.30 + 1024*0.075 + 300*2.50) / 1e6,
		},
		RateLimited: []providersuite.Named{
			{Name: "Retry-After header", Reply: providertest.Reply(429, errorBody(429, "RESOURCE_EXHAUSTED", quota), "Retry-After", "2")},
			{Name: "RetryInfo detail", Reply: providertest.Reply(429, errorBody(429, "RESOURCE_EXHAUSTED", quota,
				map[string]any{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "2s"}))},
		},
		ServerError: providersuite.Failure{
			Replies: []http.HandlerFunc{providertest.Reply(500, errorBody(500, "INTERNAL", serverError))},
			Err:     "gemini: 500 Internal Server Error (INTERNAL): " + serverError + " (gave up after 3 attempts)",
		},
		BadRequest: providersuite.BadRequest{
			Reply:   providertest.Reply(400, errorBody(400, "INVALID_ARGUMENT", badRequest)),
			Message: badRequest,
			Err:     "gemini: 400 Bad Request (INVALID_ARGUMENT): " + badRequest,
		},
		KeyInError: providersuite.Failure{
			Replies: []http.HandlerFunc{
				providertest.Reply(503, errorBody(503, "UNAVAILABLE", "The model is overloaded. Key "+testKey)),
				providertest.Reply(400, errorBody(400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key: "+testKey,
					map[string]any{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID", "domain": "googleapis.com"})),
			},
			Err: "gemini: 400 Bad Request (INVALID_ARGUMENT): API key not valid. Please pass a valid API key: [redacted]",
		},
		ToolTurn: providersuite.ToolTurn{
			Run:      providertest.WeatherTurn,
			Describe: providertest.Describe,
			App:      "gemini-test",
			Call:     providertest.Reply(200, functionCallReply),
			Path:     generatePath,
			Header:   [2]string{"X-Team", "payments"},
			Check:    checkToolTurn,
		},
	})
}

func TestStreamYieldsAndRetriesOnlyBeforeFirst(t *testing.T) {
	t.Parallel()
	// Server-sent events, as streamGenerateContent?alt=sse sends them.
	sse := func(chunks ...string) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			for _, c := range chunks {
				_, _ = io.WriteString(w, "data: "+c+"\r\n\r\n")
			}
		}
	}
	chunk := func(text, finish string) string {
		c := map[string]any{"content": map[string]any{"role": "model", "parts": []any{map[string]any{"text": text}}}, "index": 0}
		if finish != "" {
			c["finishReason"] = finish
		}
		b, _ := json.Marshal(map[string]any{"candidates": []any{c},
			"usageMetadata": map[string]any{"promptTokenCount": 10, "candidatesTokenCount": 4, "totalTokenCount": 14}})
		return string(b)
	}
	f := providertest.NewServer(t,
		providertest.Reply(503, errorBody(503, "UNAVAILABLE", "The model is overloaded.")),
		sse(chunk("It is ", ""), chunk("sunny.", "STOP")),
	)
	var a providertest.Attempts
	m, err := newModel(t.Context(), f.URL, a.Policy(2), nil)
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	var final *model.LLMResponse
	for resp, err := range m.GenerateContent(t.Context(), providertest.UserRequest("hi"), true) {
		if err != nil {
			t.Fatal(err)
		}
		if resp.Partial {
			texts = append(texts, resp.Content.Parts[0].Text)
		} else {
			final = resp
		}
	}
	if !reflect.DeepEqual(texts, []string{"It is ", "sunny."}) || final == nil || final.Content.Parts[0].Text != "It is sunny." {
		t.Errorf("partials %q, final %s", texts, providertest.JS(final))
	}
	if _, outcomes := a.Snapshot(); !reflect.DeepEqual(outcomes, []string{"retry", "ok"}) {
		t.Errorf("outcomes = %q", outcomes)
	}
	if p := f.Requests()[1].Path; p != "/v1beta/models/gemini-2.5-flash:streamGenerateContent" {
		t.Errorf("stream path = %s", p)
	}
}

func TestVertex(t *testing.T) {
	t.Parallel()
	f := providertest.NewServer(t, providertest.Reply(200, textReply))
	// With an HTTPClient of its own, Vertex trusts it to authenticate
	// (Application Default Credentials are not looked up).
	m, err := New(t.Context(), Options{
		Model: "gemini-2.5-flash", Vertex: true, Project: "acme-prod", Location: "europe-west4",
		BaseURL: f.URL, HTTPClient: f.Client(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if m.GetGoogleLLMVariant() != genai.BackendVertexAI {
		t.Errorf("variant = %v", m.GetGoogleLLMVariant())
	}
	if _, err := providertest.Generate(t.Context(), m, providertest.UserRequest("hi")); err != nil {
		t.Fatal(err)
	}
	rq := f.Requests()[0]
	if want := "/v1beta1/projects/acme-prod/locations/europe-west4/publishers/google/models/gemini-2.5-flash:generateContent"; rq.Path != want {
		t.Errorf("path = %s\nwant   %s", rq.Path, want)
	}
	if k := rq.Header.Get("X-Goog-Api-Key"); k != "" {
		t.Errorf("x-goog-api-key = %q, want none on Vertex with a project", k)
	}
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	for _, o := range []Options{
		{},
		{Model: "gemini-2.5-flash"},
		{Model: "gemini-2.5-flash", APIKey: "k", Project: "p"},
		{Model: "gemini-2.5-flash", Vertex: true},
		{Model: "gemini-2.5-flash", Vertex: true, APIKey: "k", Project: "p", Location: "l"},
	} {
		if _, err := New(t.Context(), o); err == nil {
			t.Errorf("New(%+v) = nil error", o)
		}
	}
}

// dig walks nested JSON maps and lists by key and index.
func dig(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case int:
			s, ok := v.([]any)
			if !ok || k >= len(s) {
				return nil
			}
			v = s[k]
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		}
	}
	return v
}
