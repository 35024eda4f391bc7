package main

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/agent-worker/agent-worker/internal/textclip"
	"github.com/agent-worker/agent-worker/mcptools"
)

// mcpCmd is `mcp`, with `mcp check`.
func (c *cli) mcpCmd() *cobra.Command {
	root := &cobra.Command{Use: "mcp", Short: "Work with the configured MCP servers.", Args: unknownSubcommand,
		Example: `  agent-worker mcp check --config worker.yaml`,
		RunE:    func(cmd *cobra.Command, _ []string) error { return cmd.Help() }}
	var file string
	check := &cobra.Command{
		Use:   "check [NAME] --config FILE",
		Short: "Connect to each configured MCP server (or NAME) and list its tools, or say why it cannot.",
		Example: `  agent-worker mcp check --config worker.yaml
  agent-worker mcp check github --config worker.yaml`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if file == "" {
				return usageError(cmd, errors.New("mcp check needs --config FILE"))
			}
			cfg, err := loadConfig(file, c.env)
			if err != nil {
				return err
			}
			names := slices.Sorted(maps.Keys(cfg.MCPServers))
			if len(args) == 1 {
				if _, ok := cfg.MCPServers[args[0]]; !ok {
					return configError{fmt.Errorf("no MCP server %q in %s (mcp_servers: %v)", args[0], file, names)}
				}
				names = args
			}
			if len(names) == 0 {
				fmt.Fprintf(c.stdout, "%s configures no MCP servers (mcp_servers).\n", file)
				return nil
			}
			tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "SERVER\tTRANSPORT\tTOOLS\tRESULT")
			failed := 0
			for _, n := range names {
				s := cfg.MCPServers[n]
				transport := "http " + s.URL
				if len(s.Command) > 0 {
					transport = "stdio " + strings.Join(s.Command, " ")
				}
				tools, err := mcptools.Check(cmd.Context(), n, s, nil)
				result, count := "ok", fmt.Sprint(len(tools))
				if err != nil {
					failed++
					result, count = "error: "+err.Error(), "-"
				} else {
					var list []string
					for _, t := range tools {
						list = append(list, s.ToolPrefix+t.Name)
					}
					result = "ok: " + strings.Join(list, ", ")
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", n, textclip.Runes(transport, 60, "…"), count, result)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if failed > 0 {
				return fmt.Errorf("%d of %d MCP server(s) failed", failed, len(names))
			}
			return nil
		},
	}
	check.Flags().StringVarP(&file, "config", "c", "", "config file")
	root.AddCommand(check)
	return root
}
