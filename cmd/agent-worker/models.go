package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/adk/model"
	"google.golang.org/genai"

	"github.com/agent-worker/agent-worker/internal/textclip"
	"github.com/agent-worker/agent-worker/models"
)

// modelsCmd is `models`, with `models check`.
func (c *cli) modelsCmd() *cobra.Command {
	root := &cobra.Command{Use: "models", Short: "Work with the configured models.", Args: unknownSubcommand,
		Example: `  agent-worker models check --config worker.yaml`,
		RunE:    func(cmd *cobra.Command, _ []string) error { return cmd.Help() }}
	var file string
	var timeout time.Duration
	check := &cobra.Command{
		Use:   "check [NAME] --config FILE",
		Short: "Send one short prompt through each configured model (or NAME) and report latency, tokens and errors.",
		Example: `  agent-worker models check --config worker.yaml
  agent-worker models check fast --config worker.yaml`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if file == "" {
				return usageError(cmd, errors.New("models check needs --config FILE"))
			}
			cfg, err := loadConfig(file, c.env)
			if err != nil {
				return err
			}
			names := slices.Sorted(maps.Keys(cfg.Models))
			if len(args) == 1 {
				if _, ok := cfg.Models[args[0]]; !ok {
					return configError{fmt.Errorf("no model %q in %s (models: %v)", args[0], file, names)}
				}
				names = args
			}
			tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "MODEL\tPROVIDER\tNAME\tLATENCY\tTOKENS IN/OUT\tRESULT")
			failed := 0
			for _, n := range names {
				def := cfg.Models[n]
				row := checkModel(cmd.Context(), n, def.Provider, timeout, func(ctx context.Context) (model.LLM, error) {
					return models.New(ctx, n, def, models.Env{Agent: "models-check"})
				})
				if row.err != nil {
					failed++
				}
				result := "ok: " + textclip.Runes(row.text, 60, "…")
				if row.err != nil {
					result = "error: " + row.err.Error()
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%v\t%d/%d\t%s\n", n, def.Provider, def.Model, row.latency.Round(time.Millisecond), row.in, row.out, result)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if failed > 0 {
				return fmt.Errorf("%d of %d model(s) failed", failed, len(names))
			}
			return nil
		},
	}
	check.Flags().StringVarP(&file, "config", "c", "", "config file")
	check.Flags().DurationVar(&timeout, "timeout", 60*time.Second, "how long one check may take")
	root.AddCommand(check)
	return root
}

type checkRow struct {
	latency time.Duration
	in, out int
	text    string
	err     error
}

// checkModel sends one short prompt and measures the answer.
func checkModel(ctx context.Context, name, provider string, timeout time.Duration, build func(context.Context) (model.LLM, error)) checkRow {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	m, err := build(ctx)
	if err != nil {
		return checkRow{err: err}
	}
	req := &model.LLMRequest{
		Model:    m.Name(),
		Contents: []*genai.Content{genai.NewContentFromText("Reply with the single word: ok", genai.RoleUser)},
		Config:   &genai.GenerateContentConfig{},
	}
	start := time.Now()
	var row checkRow
	for resp, err := range m.GenerateContent(ctx, req, false) {
		if err != nil {
			row.err = err
			break
		}
		if resp == nil || resp.Partial {
			continue
		}
		if u := resp.UsageMetadata; u != nil {
			row.in, row.out = int(u.PromptTokenCount), int(u.CandidatesTokenCount)
		}
		if resp.Content != nil {
			for _, p := range resp.Content.Parts {
				row.text += p.Text
			}
		}
	}
	row.latency = time.Since(start)
	return row
}
