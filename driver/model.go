package driver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/hook"
)

// An operator can switch a live agent to another configured model, or its
// own at another reasoning effort, and back (SwitchModel). The switch is
// part of the agent's durable state, next to its pause:
//
//   - It is stored under "agent.<name>.model" (a ModelChoice: the model,
//     the effort, since when, by whom and why) by the agent's owner only,
//     fenced as the pause is: a replica that does not own the agent
//     refuses the switch (ErrNotOwner) and writes nothing. A switch that
//     cannot be stored is undone and its error returned: a switch in
//     force is a stored one.
//   - It takes effect at the agent's next model call, also inside a
//     running turn's tool loop (ModelSwitch says how).
//   - It survives restarts and changes of owner: the restore that runs
//     before the agent's first turn applies it again (and a replica that
//     gains the agent back takes whatever the store holds by then).
//   - A stored switch the agent can no longer use — its model is gone
//     from the config, or cannot take the effort any more — is dropped
//     at that restore (so also when a config reload replaces the agent):
//     logged, announced as a model-switch-dropped event and deleted, and
//     the agent runs on its configured model.
//   - Every switch is logged and announced as a model-switched event that
//     names who asked (hook.Audit.By) and why.

// ModelSwitch is a model an operator can switch at run time. An agent
// whose Spec.Model implements it can be switched with SwitchModel; any
// other refuses (ErrNoModelSwitch). models.Switch is the worker's.
type ModelSwitch interface {
	// Use makes the model of key, at reasoning effort ("": the model's
	// own), the model of every next call and returns its name (what
	// pricing looks up). Key "", or the configured key without an
	// effort, is the configured model again: configured reports it. An
	// error changes nothing.
	Use(key, effort string) (name string, configured bool, err error)
	// Configured returns the configured model's key and name.
	Configured() (key, name string)
}

// ErrNoModelSwitch is returned by SwitchModel for an agent whose model
// cannot be switched (its Spec.Model is not a ModelSwitch).
var ErrNoModelSwitch = errors.New("this agent's model cannot be switched")

// ModelChoice is a model switch as it is stored, under
// "agent.<name>.model": written by the agent's owner only.
type ModelChoice struct {
	// Model is the key under the config's models: in force.
	Model string `json:"model"`
	// ReasoningEffort is the effort it was switched with ("": the
	// model's own).
	ReasoningEffort string    `json:"reasoning_effort,omitempty"`
	Since           time.Time `json:"since"`
	By              string    `json:"by,omitempty"`
	Reason          string    `json:"reason,omitempty"`
}

// ModelView is an agent's model as operators see it: the configured one,
// the one in force, and the switch that put it there, if any.
type ModelView struct {
	// Configured is the config's model key, ConfiguredName its name.
	Configured     string `json:"configured"`
	ConfiguredName string `json:"configured_name"`
	// Active is the model key in force, ActiveName its name: what the
	// guard prices its responses at and the metrics label them with.
	Active     string `json:"active"`
	ActiveName string `json:"active_name"`
	// ReasoningEffort is the effort of the switch ("": the model's own).
	ReasoningEffort string `json:"reasoning_effort,omitempty"`
	// Switched: an operator switched the model; Since, By and Reason say
	// when, who and why.
	Switched bool       `json:"switched"`
	Since    *time.Time `json:"since,omitempty"`
	By       string     `json:"by,omitempty"`
	Reason   string     `json:"reason,omitempty"`
}

// modelState is an agent's model switch.
type modelState struct {
	// op serialises switches and restores, each with its store write, so
	// the store and the model in force agree.
	op sync.Mutex
	// choice is the switch in force (nil: the configured model) and name
	// its model's name; under the agent's mu.
	choice *ModelChoice
	name   string
}

// SwitchModel switches the agent to the model of key at reasoning effort
// ("": the model's own) from its next model call, on behalf of by; key ""
// goes back to the configured model. The switch is stored before it is
// returned (see the comment at the top of this file); switching to the
// model in force changes nothing and announces nothing. Errors: the
// ModelSwitch's refusal (an unknown model, an effort the model cannot
// take), ErrNoModelSwitch, ErrNotOwner, or the store's; each leaves the
// model in force as it was.
func (a *Agent) SwitchModel(by hook.Audit, key, effort string) (ModelView, error) {
	sw, ok := a.spec.Model.(ModelSwitch)
	if !ok {
		return ModelView{}, fmt.Errorf("agent %q: %w", a.spec.Name, ErrNoModelSwitch)
	}
	if !a.owns() {
		return ModelView{}, fmt.Errorf("switch the model of agent %q: %w", a.spec.Name, ErrNotOwner)
	}
	a.model.op.Lock()
	defer a.model.op.Unlock()
	a.mu.Lock()
	prev, prevName := a.model.choice, a.model.name
	a.mu.Unlock()
	name, configured, err := sw.Use(key, effort)
	if err != nil {
		return ModelView{}, fmt.Errorf("switch the model of agent %q: %w", a.spec.Name, err)
	}
	var next *ModelChoice
	if !configured {
		next = &ModelChoice{Model: key, ReasoningEffort: effort, Since: a.clock.Now(), By: by.By, Reason: by.Reason}
	}
	if sameChoice(prev, next) {
		return a.ModelView()
	}
	if err := a.storeModel(next, "the switch is refused and undone"); err != nil {
		a.useChoice(sw, prev)
		return ModelView{}, fmt.Errorf("switch the model of agent %q: %w", a.spec.Name, err)
	}
	a.mu.Lock()
	a.model.choice, a.model.name = next, name
	a.mu.Unlock()
	cfgKey, cfgName := sw.Configured()
	from := cfgKey
	if prev != nil {
		from = prev.Model
	}
	data := audited(by, map[string]any{"model": cfgKey, "name": name, "configured": cfgKey, "previous": from, "previous_name": orName(prevName, cfgName), "reset": next == nil})
	if next != nil {
		data["model"] = next.Model
		if effort != "" {
			data["reasoning_effort"] = effort
		}
	}
	a.log.Info("model switched: the next model call uses it", "model", data["model"], "name", name, "reasoning_effort", effort,
		"previous", from, "by", by.By, "reason", by.Reason)
	a.emit(events.ModelSwitched, data)
	return a.ModelView()
}

// ModelView returns the agent's model as operators see it, or
// ErrNoModelSwitch for an agent whose model cannot be switched.
func (a *Agent) ModelView() (ModelView, error) {
	sw, ok := a.spec.Model.(ModelSwitch)
	if !ok {
		return ModelView{}, fmt.Errorf("agent %q: %w", a.spec.Name, ErrNoModelSwitch)
	}
	key, name := sw.Configured()
	v := ModelView{Configured: key, ConfiguredName: name, Active: key, ActiveName: name}
	a.mu.Lock()
	defer a.mu.Unlock()
	if c := a.model.choice; c != nil {
		since := c.Since
		v.Active, v.ActiveName, v.ReasoningEffort = c.Model, a.model.name, c.ReasoningEffort
		v.Switched, v.Since, v.By, v.Reason = true, &since, c.By, c.Reason
	}
	return v, nil
}

// ModelChoice returns the switch in force; false when the agent runs on
// its configured model.
func (a *Agent) ModelChoice() (ModelChoice, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.model.choice == nil {
		return ModelChoice{}, false
	}
	return *a.model.choice, true
}

// restoreModel applies the stored switch (or, when none is stored, the
// configured model: another owner may have switched back meanwhile). A
// stored switch the agent cannot use any more is dropped, logged,
// announced and deleted.
func (a *Agent) restoreModel(ctx context.Context) error {
	a.model.op.Lock()
	defer a.model.op.Unlock()
	var c ModelChoice
	found, err := a.load(ctx, "model", &c)
	if err != nil {
		return err
	}
	sw, ok := a.spec.Model.(ModelSwitch)
	if !ok {
		if found {
			a.log.Warn("stored model switch ignored: this agent's model cannot be switched", "model", c.Model)
		}
		return nil
	}
	var next *ModelChoice
	name := ""
	if found {
		var configured bool
		name, configured, err = sw.Use(c.Model, c.ReasoningEffort)
		switch {
		case err != nil:
			a.dropModel(sw, c, err)
		case !configured:
			next = &c
		}
	}
	if next == nil {
		a.useChoice(sw, nil)
	}
	a.mu.Lock()
	a.model.choice, a.model.name = next, name
	a.mu.Unlock()
	if next != nil {
		a.log.Info("model switch restored", "model", c.Model, "name", name, "reasoning_effort", c.ReasoningEffort, "since", c.Since, "by", c.By)
	}
	return nil
}

// dropModel gives up a stored switch the agent cannot use: logged,
// announced and deleted from the store (by the owner only).
func (a *Agent) dropModel(sw ModelSwitch, c ModelChoice, why error) {
	key, _ := sw.Configured()
	a.log.Warn("stored model switch dropped: the agent runs on its configured model", "model", c.Model, "reasoning_effort", c.ReasoningEffort,
		"switched_by", c.By, "switched_since", c.Since, "configured", key, "error", why)
	data := map[string]any{"model": c.Model, "configured": key, "error": why.Error(), "switched_since": c.Since}
	if c.ReasoningEffort != "" {
		data["reasoning_effort"] = c.ReasoningEffort
	}
	if c.By != "" {
		data["switched_by"] = c.By
	}
	_ = a.storeModel(nil, "the stored switch stays and is dropped again at the next restore") // before the event: whoever hears it finds it gone
	a.emit(events.ModelSwitchDropped, data)
}

// useChoice puts c (nil: the configured model) in force on sw; a choice
// that was in force before cannot fail but by a provider that cannot be
// built any more, which is logged.
func (a *Agent) useChoice(sw ModelSwitch, c *ModelChoice) {
	key, effort := "", ""
	if c != nil {
		key, effort = c.Model, c.ReasoningEffort
	}
	if _, _, err := sw.Use(key, effort); err != nil {
		a.log.Error("model switch not undone: the model in force could not be built again", "model", key, "error", err)
	}
}

// storeModel writes c, or deletes the stored switch when c is nil; then
// says what a failure leaves (persist).
func (a *Agent) storeModel(c *ModelChoice, then string) error {
	if c == nil {
		return a.persist("model", then, nil)
	}
	return a.persist("model", then, c)
}

func sameChoice(a, b *ModelChoice) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Model == b.Model && a.ReasoningEffort == b.ReasoningEffort
}

func orName(name, otherwise string) string {
	if name == "" {
		return otherwise
	}
	return name
}
