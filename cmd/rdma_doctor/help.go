// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"strings"
	"text/template"

	"github.com/alecthomas/kingpin/v2"
)

// The help starts with what matters: the top-level help shows the shared
// flags, then the default command's (serve: the web flags), the commands,
// and the collector flags last; a command's help shows its own flags and
// points to the top-level help for the shared ones instead of repeating
// ~100 lines of them.
const usageTemplate = `{{define "FormatCommand" -}}
{{if .FlagSummary}} {{.FlagSummary}}{{end -}}
{{range .Args}}{{if not .Hidden}} {{if not .Required}}[{{end}}{{if .PlaceHolder}}{{.PlaceHolder}}{{else}}<{{.Name}}>{{end}}{{if .Value|IsCumulative}}...{{end}}{{if not .Required}}]{{end}}{{end}}{{end -}}
{{end -}}

{{define "FormatCommands" -}}
{{range .FlattenedCommands -}}
{{if not .Hidden -}}
{{printf "  %s" .FullCommand}}{{if .Default}} (default){{end}}
{{.Help|Wrap 4}}
{{end -}}
{{end -}}
{{end -}}

{{if .Context.SelectedCommand -}}
usage: {{.App.Name}} {{.Context.SelectedCommand.FullCommand}} [<flags>]{{range .Context.SelectedCommand.Args}} {{if not .Required}}[{{end}}<{{.Name}}>{{if not .Required}}]{{end}}{{end}}

{{.Context.SelectedCommand.Help|Wrap 0 -}}
{{if .Context.SelectedCommand.Flags}}
Flags of {{.Context.SelectedCommand.FullCommand}}:
{{.Context.SelectedCommand.Flags|FlagsToTwoColumns|FormatTwoColumns -}}
{{end}}
{{- if .Context.Args}}
Args:
{{.Context.Args|ArgsToTwoColumns|FormatTwoColumns -}}
{{end}}
Flags every command shares (--config.file, --path.rootfs, --log.level, the
collector flags): {{.App.Name}} --help
{{else -}}
usage: {{.App.Name}} [<command>] [<flags>]

{{.App.Help|Wrap 0}}
Flags:
{{.App.Flags|SharedFlags|FlagsToTwoColumns|FormatTwoColumns}}
{{- range .App.Commands}}{{if .Default}}
Flags of {{.FullCommand}}, the default command:
{{.Flags|FlagsToTwoColumns|FormatTwoColumns}}
{{- end}}{{end}}
Commands ({{.App.Name}} <command> --help shows a command's flags):
{{template "FormatCommands" .App -}}
Collector flags (--[no-]collector.NAME turns one on or off):
{{.App.Flags|CollectorFlags|FlagsToTwoColumns|FormatTwoColumns}}
{{end -}}
`

// isCollectorFlag tells the collector flags, listed last, from the shared
// ones (help, version, config, paths, log).
func isCollectorFlag(f *kingpin.FlagModel) bool { return strings.HasPrefix(f.Name, "collector.") }

func filterFlags(flags []*kingpin.FlagModel, keep func(*kingpin.FlagModel) bool) []*kingpin.FlagModel {
	var out []*kingpin.FlagModel
	for _, f := range flags {
		if keep(f) {
			out = append(out, f)
		}
	}
	return out
}

// useHelpTemplate sets the usage template and the functions it uses.
func useHelpTemplate(app *kingpin.Application) {
	app.UsageFuncs(template.FuncMap{
		"SharedFlags": func(f []*kingpin.FlagModel) []*kingpin.FlagModel {
			return filterFlags(f, func(m *kingpin.FlagModel) bool { return !isCollectorFlag(m) })
		},
		"CollectorFlags": func(f []*kingpin.FlagModel) []*kingpin.FlagModel { return filterFlags(f, isCollectorFlag) },
	})
	app.UsageTemplate(usageTemplate)
}
