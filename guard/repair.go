package guard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/agent-worker/agent-worker/store"
)

// loadLedger reads a stored ledger (an agent's state or the worker's)
// under key into v, as store.GetJSON does, except that a number beyond
// float64's range — 1e999, how an infinite amount reads in JSON, which
// encoding/json refuses, so that one such number failed the whole load
// and the agent's restore with it, retried forever — is repaired
// (repairedAmount) and logged ("guardrail state repaired at load", with
// each field, what it held and what it holds now). repaired reports
// whether anything was, so the caller stores the mended ledger. found is
// false when the key does not exist.
func (g *Guard) loadLedger(ctx context.Context, agent, key string, v any) (found, repaired bool, err error) {
	e, err := g.o.Store.Get(ctx, key)
	if errors.Is(err, store.ErrNotFound) {
		return false, false, nil
	}
	if err != nil {
		return false, false, err
	}
	mended, err := decodeLedger(e.Value, v)
	if err != nil {
		return false, false, fmt.Errorf("%w: %s: %w", store.ErrUnreadable, key, err)
	}
	if len(mended) > 0 {
		g.o.Log.Warn("guardrail state repaired at load", "agent", agent, "key", key, "repaired", strings.Join(mended, "; "))
	}
	return true, len(mended) > 0, nil
}

// decodeLedger decodes data into v. When that fails only for numbers out
// of float64's range, each is replaced by repairedAmount and the ledger
// decoded again; mended lists them ("session_spent_usd 1e999 → 1e+09"),
// sorted. Any other fault is the first decode's error.
func decodeLedger(data []byte, v any) (mended []string, err error) {
	err = json.Unmarshal(data, v)
	if _, numeric := errors.AsType[*json.UnmarshalTypeError](err); !numeric {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var tree any
	if dec.Decode(&tree) != nil {
		return nil, err
	}
	tree = mendNumbers(tree, "", &mended)
	if len(mended) == 0 {
		return nil, err
	}
	fixed, merr := json.Marshal(tree)
	if merr != nil || json.Unmarshal(fixed, v) != nil {
		return nil, err
	}
	slices.Sort(mended)
	return mended, nil
}

// mendNumbers replaces the out-of-range numbers of a decoded JSON value,
// noting each in mended under its path ("trip.spent_usd").
func mendNumbers(v any, path string, mended *[]string) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			p := k
			if path != "" {
				p = path + "." + k
			}
			x[k] = mendNumbers(e, p, mended)
		}
	case []any:
		for i, e := range x {
			x[i] = mendNumbers(e, path+"."+strconv.Itoa(i), mended)
		}
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		if !errors.Is(err, strconv.ErrRange) {
			return x
		}
		to := repairedAmount(path, f)
		*mended = append(*mended, fmt.Sprintf("%s %s → %v", path, clipNumber(string(x)), to))
		return json.Number(strconv.FormatFloat(to, 'g', -1, 64))
	}
	return v
}

// repairedAmount is what a stored amount out of range (f: ±Inf, or 0
// when it was too small) becomes. A spend of +Inf becomes MaxCeilingUSD:
// it stays at or over every ceiling a reset may set, so the repair never
// lets an agent spend more than it had (a daily spend starts over at
// midnight; a session spend stays: clear guard.<agent> in the store to
// start the session over). Everything else — an added budget (the
// configured ceiling holds), a trip's numbers (the trip itself stays), a
// negative infinity — becomes 0.
func repairedAmount(path string, f float64) float64 {
	switch path {
	case "session_spent_usd", "day_spent_usd", "spent_usd": // state's, workerState's
		if math.IsInf(f, 1) {
			return MaxCeilingUSD
		}
	}
	return 0
}

// clipNumber keeps a number's text short in a log line.
func clipNumber(s string) string {
	if len(s) > 32 {
		return s[:32] + "…"
	}
	return s
}
