package driver

import (
	"context"
	"fmt"
	"log/slog"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/inbox"
	"github.com/agent-worker/agent-worker/internal/textclip"
	"github.com/agent-worker/agent-worker/tracing"
)

// MaxTurnLinks bounds the links of a turn's span to the traces its
// messages arrived with: a turn that drains a backlog links the first
// ones and counts the rest (agent_worker.links_dropped).
const MaxTurnLinks = 32

// Span attributes of a turn (the GenAI ones follow the OpenTelemetry
// semantic conventions; the rest are the worker's own).
const (
	attrAgent        = attribute.Key("gen_ai.agent.name")
	attrModel        = attribute.Key("gen_ai.request.model")
	attrTurn         = attribute.Key("agent_worker.turn")
	attrWakes        = attribute.Key("agent_worker.wakes")
	attrMessages     = attribute.Key("agent_worker.messages")
	attrOutcome      = attribute.Key("agent_worker.outcome")
	attrCost         = attribute.Key("agent_worker.cost_usd")
	attrReplayed     = attribute.Key("agent_worker.replayed")
	attrModelCalls   = attribute.Key("agent_worker.model_calls")
	attrToolCalls    = attribute.Key("agent_worker.tool_calls")
	attrInputTokens  = attribute.Key("gen_ai.usage.input_tokens")
	attrOutputTokens = attribute.Key("gen_ai.usage.output_tokens")
	attrLinksDropped = attribute.Key("agent_worker.links_dropped")
	attrResumes      = attribute.Key("agent_worker.resumes_journal_turn")
	attrMessageID    = attribute.Key("messaging.message.id")
	attrSource       = attribute.Key("agent_worker.message.source")
)

// spannedEvents are the agent events that become events of the running
// turn's span: what an on-call engineer reading the trace needs to see
// happen inside the turn.
var spannedEvents = map[string]bool{
	"guardrail-tripped":      true, // guard.EventTripped
	"watchdog-alert":         true, // watchdog.EventAlert
	events.ApprovalRequested: true,
	events.ApprovalDecided:   true,
	events.TurnResumed:       true,
	events.Halted:            true,
	events.Interrupted:       true,
	events.Throttled:         true,
}

// noTracer is the tracer of a driver without Deps.Tracer.
var noTracer = noop.NewTracerProvider().Tracer("")

// startTurnSpan starts the span of turn n: a root, so each turn is one
// trace, linked to the traces its messages arrived with (their
// traceparent: a sender's trace, a subagent's run). It returns the
// turn's context and a logger whose lines carry trace_id and span_id
// when the span is sampled.
func (a *Agent) startTurnSpan(ctx context.Context, n uint64, wakes []string, batch inbox.Batch) (context.Context, trace.Span, *slog.Logger) {
	var links []trace.Link
	dropped := 0
	var seen map[string]bool // made for the first message that has a context
	for _, m := range batch.Messages {
		if m.TraceParent == "" || seen[m.TraceParent] {
			continue
		}
		if seen == nil {
			seen = map[string]bool{}
		}
		seen[m.TraceParent] = true
		sc, ok := tracing.Remote(m.TraceParent)
		if !ok {
			continue
		}
		if len(links) == MaxTurnLinks {
			dropped++
			continue
		}
		links = append(links, trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{
			attrMessageID.String(m.ID), attrSource.String(m.Source),
		}})
	}
	attrs := []attribute.KeyValue{
		attrAgent.String(a.spec.Name),
		attrTurn.Int64(int64(n)),
		attrWakes.StringSlice(wakes),
		attrMessages.Int(len(batch.Messages)),
	}
	if a.spec.Model != nil {
		attrs = append(attrs, attrModel.String(a.spec.Model.Name()))
	}
	if dropped > 0 {
		attrs = append(attrs, attrLinksDropped.Int(dropped))
	}
	ctx, span := a.tracer.Start(ctx, "turn "+a.spec.Name, trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithLinks(links...), trace.WithAttributes(attrs...))
	log := a.log
	if sc := span.SpanContext(); sc.IsSampled() {
		log = log.With("trace_id", sc.TraceID().String(), "span_id", sc.SpanID().String())
		a.span.Store(&span)
	}
	return ctx, span, log
}

// endTurnSpan records the turn's outcome on its span and ends it.
func (a *Agent) endTurnSpan(span trace.Span, sum TurnSummary, err error) {
	a.span.Store(nil)
	if !span.IsRecording() {
		span.End()
		return
	}
	span.SetAttributes(
		attrOutcome.String(sum.Outcome),
		attrCost.Float64(sum.CostUSD),
		attrReplayed.Int(sum.Replayed),
		attrModelCalls.Int(sum.ModelCalls),
		attrToolCalls.Int(sum.ToolCalls),
		attrInputTokens.Int(sum.TokensIn),
		attrOutputTokens.Int(sum.TokensOut),
	)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, sum.Outcome+": "+err.Error())
	}
	span.End()
}

// traceID is the running turn span's trace id for events ("" when the
// turn is not sampled), so metrics can attach it as an exemplar.
func traceID(span trace.Span) string {
	if sc := span.SpanContext(); sc.IsSampled() {
		return sc.TraceID().String()
	}
	return ""
}

// withTrace adds the turn's trace id to a turn event's data, when the
// turn was sampled.
func withTrace(data map[string]any, traceID string) map[string]any {
	if traceID != "" {
		data["trace_id"] = traceID
	}
	return data
}

// spanEvent adds e to the span of its agent's running turn, when e is
// one of spannedEvents and the turn is traced. It is the driver's tap on
// the event bus: guardrail trips and watchdog alerts are published by
// their plug-ins, which know nothing of spans.
func (d *Driver) spanEvent(e events.Event) {
	if !spannedEvents[e.Type] {
		return
	}
	a, err := d.Agent(e.Agent)
	if err != nil {
		return
	}
	sp := a.span.Load()
	if sp == nil {
		return
	}
	attrs := make([]attribute.KeyValue, 0, len(e.Data))
	for k, v := range e.Data {
		switch v := v.(type) {
		case string:
			attrs = append(attrs, attribute.String(k, textclip.Runes(v, 500, "…")))
		case bool:
			attrs = append(attrs, attribute.Bool(k, v))
		case int:
			attrs = append(attrs, attribute.Int(k, v))
		case int64:
			attrs = append(attrs, attribute.Int64(k, v))
		case uint64:
			attrs = append(attrs, attribute.Int64(k, int64(v)))
		case float64:
			attrs = append(attrs, attribute.Float64(k, v))
		default:
			attrs = append(attrs, attribute.String(k, textclip.Runes(fmt.Sprint(v), 500, "…")))
		}
	}
	(*sp).AddEvent(e.Type, trace.WithTimestamp(e.Time), trace.WithAttributes(attrs...))
}
