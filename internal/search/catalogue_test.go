package search

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
)

// realTool is a tool definition in the shape real MCP servers publish, under
// the key (exposed name) the gateway would give it.
type realTool struct {
	key  string
	tool string
}

// realTools are modelled on the reference GitHub, Slack, filesystem,
// PostgreSQL and SQLite servers, the Atlassian Jira server, and the weather
// tutorial server. Several deliberately compete for the same words.
var realTools = []realTool{
	{"github_create_issue", `{"name":"create_issue","description":"Create a new issue in a GitHub repository","inputSchema":{"type":"object","properties":{"owner":{"type":"string","description":"Repository owner"},"repo":{"type":"string","description":"Repository name"},"title":{"type":"string","description":"Issue title"},"body":{"type":"string","description":"Issue body content"},"assignees":{"type":"array","items":{"type":"string"},"description":"Usernames to assign to this issue"},"labels":{"type":"array","items":{"type":"string"},"description":"Labels to apply to this issue"},"milestone":{"type":"number","description":"Milestone number"}},"required":["owner","repo","title"]}}`},
	{"github_get_issue", `{"name":"get_issue","description":"Get details of a specific issue in a GitHub repository.","inputSchema":{"type":"object","properties":{"owner":{"type":"string","description":"Repository owner"},"repo":{"type":"string","description":"Repository name"},"issue_number":{"type":"number","description":"The number of the issue"}},"required":["owner","repo","issue_number"]}}`},
	{"github_list_issues", `{"name":"list_issues","description":"List issues in a GitHub repository with filtering options","inputSchema":{"type":"object","properties":{"owner":{"type":"string","description":"Repository owner"},"repo":{"type":"string","description":"Repository name"},"state":{"type":"string","enum":["open","closed","all"],"description":"Filter by state"},"labels":{"type":"array","items":{"type":"string"},"description":"Filter by labels"},"sort":{"type":"string","description":"Sort by created, updated or comments"},"page":{"type":"number","description":"Page number"},"per_page":{"type":"number","description":"Results per page"}}}}`},
	{"github_update_issue", `{"name":"update_issue","description":"Update an existing issue in a GitHub repository","inputSchema":{"type":"object","properties":{"owner":{"type":"string"},"repo":{"type":"string"},"issue_number":{"type":"number"},"title":{"type":"string","description":"New title"},"body":{"type":"string","description":"New description"},"state":{"type":"string","enum":["open","closed"],"description":"New state"}}}}`},
	{"github_add_issue_comment", `{"name":"add_issue_comment","description":"Add a comment to an existing issue","inputSchema":{"type":"object","properties":{"owner":{"type":"string"},"repo":{"type":"string"},"issue_number":{"type":"number"},"body":{"type":"string","description":"Comment text"}}}}`},
	{"github_search_issues", `{"name":"search_issues","description":"Search for issues and pull requests across GitHub repositories","inputSchema":{"type":"object","properties":{"q":{"type":"string","description":"Search query using GitHub issues search syntax"},"sort":{"type":"string"},"order":{"type":"string","enum":["asc","desc"]}}}}`},
	{"github_create_pull_request", `{"name":"create_pull_request","description":"Create a new pull request in a GitHub repository","inputSchema":{"type":"object","properties":{"owner":{"type":"string"},"repo":{"type":"string"},"title":{"type":"string","description":"Pull request title"},"head":{"type":"string","description":"The name of the branch where your changes are implemented"},"base":{"type":"string","description":"The name of the branch you want the changes pulled into"},"draft":{"type":"boolean","description":"Whether to create the pull request as a draft"}}}}`},
	{"github_merge_pull_request", `{"name":"merge_pull_request","description":"Merge a pull request","inputSchema":{"type":"object","properties":{"owner":{"type":"string"},"repo":{"type":"string"},"pull_number":{"type":"number"},"merge_method":{"type":"string","enum":["merge","squash","rebase"]}}}}`},
	{"github_get_file_contents", `{"name":"get_file_contents","description":"Get the contents of a file or directory from a GitHub repository","inputSchema":{"type":"object","properties":{"owner":{"type":"string"},"repo":{"type":"string"},"path":{"type":"string","description":"Path to the file or directory"},"branch":{"type":"string","description":"Branch to get contents from"}}}}`},
	{"github_create_or_update_file", `{"name":"create_or_update_file","description":"Create or update a single file in a GitHub repository","inputSchema":{"type":"object","properties":{"owner":{"type":"string"},"repo":{"type":"string"},"path":{"type":"string","description":"Path where to create/update the file"},"content":{"type":"string","description":"Content of the file"},"message":{"type":"string","description":"Commit message"},"branch":{"type":"string"},"sha":{"type":"string","description":"SHA of the file being replaced (required when updating existing files)"}}}}`},
	{"github_push_files", `{"name":"push_files","description":"Push multiple files to a GitHub repository in a single commit","inputSchema":{"type":"object","properties":{"owner":{"type":"string"},"repo":{"type":"string"},"branch":{"type":"string"},"files":{"type":"array","items":{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}}},"description":"Array of files to push"},"message":{"type":"string","description":"Commit message"}}}}`},
	{"github_search_code", `{"name":"search_code","description":"Search for code across GitHub repositories","inputSchema":{"type":"object","properties":{"q":{"type":"string","description":"Search query"},"per_page":{"type":"number"}}}}`},
	{"github_search_repositories", `{"name":"search_repositories","description":"Search for GitHub repositories","inputSchema":{"type":"object","properties":{"query":{"type":"string","description":"Search query (see GitHub search syntax)"},"page":{"type":"number"}}}}`},
	{"github_create_repository", `{"name":"create_repository","description":"Create a new GitHub repository in your account","inputSchema":{"type":"object","properties":{"name":{"type":"string","description":"Repository name"},"description":{"type":"string"},"private":{"type":"boolean","description":"Whether the repository should be private"},"autoInit":{"type":"boolean","description":"Initialize with README.md"}}}}`},
	{"github_create_branch", `{"name":"create_branch","description":"Create a new branch in a GitHub repository","inputSchema":{"type":"object","properties":{"owner":{"type":"string"},"repo":{"type":"string"},"branch":{"type":"string","description":"Name for the new branch"},"from_branch":{"type":"string","description":"Source branch to create from (defaults to the repository's default branch)"}}}}`},
	{"github_list_commits", `{"name":"list_commits","description":"Get list of commits of a branch in a GitHub repository","inputSchema":{"type":"object","properties":{"owner":{"type":"string"},"repo":{"type":"string"},"sha":{"type":"string"},"page":{"type":"number"}}}}`},

	{"jira_create_issue", `{"name":"create_issue","description":"Create a new Jira issue with optional Epic link or parent for subtasks.","inputSchema":{"type":"object","properties":{"project_key":{"type":"string","description":"The JIRA project key (e.g. 'PROJ', 'DEV', 'SUPPORT')"},"summary":{"type":"string","description":"Summary/title of the issue"},"issue_type":{"type":"string","description":"Issue type (e.g. 'Task', 'Bug', 'Story', 'Epic', 'Subtask')"},"assignee":{"type":"string","description":"Assignee's user identifier"},"description":{"type":"string","description":"Issue description"}},"required":["project_key","summary","issue_type"]}}`},
	{"jira_get_issue", `{"name":"get_issue","description":"Get details of a specific Jira issue including its Epic links and relationship information.","inputSchema":{"type":"object","properties":{"issue_key":{"type":"string","description":"Jira issue key (e.g., 'PROJ-123')"},"fields":{"type":"string","description":"Comma-separated list of fields to return"},"expand":{"type":"string"}}}}`},
	{"jira_search", `{"name":"search","description":"Search Jira issues using JQL (Jira Query Language).","inputSchema":{"type":"object","properties":{"jql":{"type":"string","description":"JQL query string"},"fields":{"type":"string"},"limit":{"type":"integer","minimum":1,"maximum":50}}}}`},
	{"jira_transition_issue", `{"name":"transition_issue","description":"Transition a Jira issue to a new status.","inputSchema":{"type":"object","properties":{"issue_key":{"type":"string"},"transition_id":{"type":"string","description":"ID of the transition to perform"},"comment":{"type":"string","description":"Comment to add during the transition"}}}}`},
	{"jira_add_comment", `{"name":"add_comment","description":"Add a comment to a Jira issue.","inputSchema":{"type":"object","properties":{"issue_key":{"type":"string"},"comment":{"type":"string","description":"Comment text in Markdown format"}}}}`},
	{"jira_get_project_issues", `{"name":"get_project_issues","description":"Get all issues for a specific Jira project.","inputSchema":{"type":"object","properties":{"project_key":{"type":"string"},"limit":{"type":"integer"},"start_at":{"type":"integer"}}}}`},

	{"slack_post_message", `{"name":"slack_post_message","description":"Post a new message to a Slack channel","inputSchema":{"type":"object","properties":{"channel_id":{"type":"string","description":"The ID of the channel to post to"},"text":{"type":"string","description":"The message text to post"}},"required":["channel_id","text"]}}`},
	{"slack_reply_to_thread", `{"name":"slack_reply_to_thread","description":"Reply to a specific message thread in Slack","inputSchema":{"type":"object","properties":{"channel_id":{"type":"string","description":"The ID of the channel containing the thread"},"thread_ts":{"type":"string","description":"The timestamp of the parent message in the format '1234567890.123456'"},"text":{"type":"string","description":"The reply text"}}}}`},
	{"slack_add_reaction", `{"name":"slack_add_reaction","description":"Add a reaction emoji to a message","inputSchema":{"type":"object","properties":{"channel_id":{"type":"string"},"timestamp":{"type":"string","description":"The timestamp of the message to react to"},"reaction":{"type":"string","description":"The name of the emoji reaction (without ::)"}}}}`},
	{"slack_list_channels", `{"name":"slack_list_channels","description":"List public or pre-defined channels in the workspace with pagination","inputSchema":{"type":"object","properties":{"limit":{"type":"number","description":"Maximum number of channels to return (default 100, max 200)"},"cursor":{"type":"string","description":"Pagination cursor for next page of results"}}}}`},
	{"slack_get_channel_history", `{"name":"slack_get_channel_history","description":"Get recent messages from a channel","inputSchema":{"type":"object","properties":{"channel_id":{"type":"string"},"limit":{"type":"number","description":"Number of messages to retrieve (default 10)"}}}}`},
	{"slack_get_users", `{"name":"slack_get_users","description":"Get a list of all users in the workspace with their basic profile information","inputSchema":{"type":"object","properties":{"cursor":{"type":"string"},"limit":{"type":"number"}}}}`},
	{"discord_sendMessage", `{"name":"sendMessage","description":"Send a message to a Discord text channel by channel ID","inputSchema":{"type":"object","properties":{"channelId":{"type":"string","description":"Discord channel ID"},"content":{"type":"string","description":"Message content"}}}}`},
	{"gmail_send_email", `{"name":"send_email","description":"Sends a new email to the given recipients","inputSchema":{"type":"object","properties":{"to":{"type":"array","items":{"type":"string"},"description":"List of recipient email addresses"},"subject":{"type":"string","description":"Email subject"},"body":{"type":"string","description":"Email body content"}}}}`},

	{"fs_read_file", `{"name":"read_file","description":"Read the complete contents of a file from the file system. Handles various text encodings and provides detailed error messages if the file cannot be read. Use this tool when you need to examine the contents of a single file. Only works within allowed directories.","inputSchema":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}}`},
	{"fs_read_multiple_files", `{"name":"read_multiple_files","description":"Read the contents of multiple files simultaneously. This is more efficient than reading files one by one when you need to analyze or compare multiple files. Each file's content is returned with its path as a reference.","inputSchema":{"type":"object","properties":{"paths":{"type":"array","items":{"type":"string"}}}}}`},
	{"fs_write_file", `{"name":"write_file","description":"Create a new file or completely overwrite an existing file with new content. Use with caution as it will overwrite existing files without warning.","inputSchema":{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}}}}`},
	{"fs_edit_file", `{"name":"edit_file","description":"Make line-based edits to a text file. Each edit replaces exact line sequences with new content. Returns a git-style diff showing the changes made.","inputSchema":{"type":"object","properties":{"path":{"type":"string"},"edits":{"type":"array","items":{"type":"object","properties":{"oldText":{"type":"string","description":"Text to search for - must match exactly"},"newText":{"type":"string","description":"Text to replace with"}}}},"dryRun":{"type":"boolean","description":"Preview changes using git-style diff format"}}}}`},
	{"fs_create_directory", `{"name":"create_directory","description":"Create a new directory or ensure a directory exists. Can create multiple nested directories in one operation.","inputSchema":{"type":"object","properties":{"path":{"type":"string"}}}}`},
	{"fs_list_directory", `{"name":"list_directory","description":"Get a detailed listing of all files and directories in a specified path. Results clearly distinguish between files and directories with [FILE] and [DIR] prefixes.","inputSchema":{"type":"object","properties":{"path":{"type":"string"}}}}`},
	{"fs_directory_tree", `{"name":"directory_tree","description":"Get a recursive tree view of files and directories as a JSON structure.","inputSchema":{"type":"object","properties":{"path":{"type":"string"}}}}`},
	{"fs_move_file", `{"name":"move_file","description":"Move or rename files and directories. Can move files between directories and rename them in a single operation.","inputSchema":{"type":"object","properties":{"source":{"type":"string"},"destination":{"type":"string"}}}}`},
	{"fs_search_files", `{"name":"search_files","description":"Recursively search for files and directories matching a pattern. The search is case-insensitive and matches partial names.","inputSchema":{"type":"object","properties":{"path":{"type":"string"},"pattern":{"type":"string"},"excludePatterns":{"type":"array","items":{"type":"string"}}}}}`},
	{"fs_get_file_info", `{"name":"get_file_info","description":"Retrieve detailed metadata about a file or directory: size, creation time, last modified time, permissions, and type.","inputSchema":{"type":"object","properties":{"path":{"type":"string"}}}}`},

	{"weather_get_forecast", `{"name":"get_forecast","description":"Get weather forecast for a location.","inputSchema":{"type":"object","properties":{"latitude":{"type":"number","description":"Latitude of the location"},"longitude":{"type":"number","description":"Longitude of the location"}},"required":["latitude","longitude"]}}`},
	{"weather_get_alerts", `{"name":"get_alerts","description":"Get weather alerts for a US state.","inputSchema":{"type":"object","properties":{"state":{"type":"string","description":"Two-letter US state code (e.g. CA, NY)"}}}}`},
	{"weather_getCurrentConditions", `{"name":"getCurrentConditions","title":"Current weather","description":"Current temperature, humidity, wind speed and sky conditions at a city.","inputSchema":{"type":"object","properties":{"city":{"type":"string","description":"City name, e.g. Berlin"},"units":{"type":"string","enum":["metric","imperial"]}}}}`},

	{"postgres_query", `{"name":"query","description":"Run a read-only SQL query","inputSchema":{"type":"object","properties":{"sql":{"type":"string"}}}}`},
	{"sqlite_read_query", `{"name":"read_query","description":"Execute a SELECT query on the SQLite database","inputSchema":{"type":"object","properties":{"query":{"type":"string","description":"SELECT SQL query to execute"}}}}`},
	{"sqlite_write_query", `{"name":"write_query","description":"Execute an INSERT, UPDATE, or DELETE query on the SQLite database","inputSchema":{"type":"object","properties":{"query":{"type":"string","description":"SQL query to execute"}}}}`},
	{"sqlite_create_table", `{"name":"create_table","description":"Create a new table in the SQLite database","inputSchema":{"type":"object","properties":{"query":{"type":"string","description":"CREATE TABLE SQL statement"}}}}`},
	{"sqlite_list_tables", `{"name":"list_tables","description":"List all tables in the SQLite database","inputSchema":{"type":"object","properties":{}}}`},
	{"sqlite_describe_table", `{"name":"describe_table","description":"Get the schema information for a specific table","inputSchema":{"type":"object","properties":{"table_name":{"type":"string","description":"Name of the table to describe"}}}}`},
}

// Vocabulary of the synthetic distractor tools. It overlaps the real tools'
// words (create, issue, message, file, channel, ...) on purpose.
var (
	synthServices = []string{"acme", "globex", "initech", "umbrella", "hooli", "stark", "wayne", "wonka", "tyrell", "cyberdyne", "soylent", "vandelay", "aperture", "blackmesa", "oscorp"}
	synthSystems  = []string{"CRM", "billing system", "ticketing system", "inventory service", "HR portal", "analytics platform", "ERP", "CMS", "helpdesk", "data warehouse", "logistics API", "marketing suite"}
	synthVerbs    = []string{"create", "get", "list", "update", "delete", "search", "archive", "export", "import", "sync", "approve", "assign", "close", "reopen", "validate", "schedule", "cancel", "refresh", "publish", "send"}
	synthNouns    = []string{"invoice", "order", "customer", "ticket", "record", "report", "contact", "lead", "shipment", "product", "employee", "campaign", "asset", "contract", "payment", "subscription", "warehouse", "vendor", "document", "note", "task", "event", "message", "file", "issue", "comment", "attachment", "user", "team", "project"}
	synthAttrs    = []string{"status", "owner", "creation date", "total amount", "priority", "tags", "identifier", "metadata", "history", "due date", "region", "currency"}
)

// synthTools returns n deterministic distractor tools as (key, definition).
func synthTools(n int) []realTool {
	rng := rand.New(rand.NewPCG(7, 11))
	pick := func(s []string) string { return s[rng.IntN(len(s))] }
	out := make([]realTool, n)
	for i := range out {
		svc, verb, noun := pick(synthServices), pick(synthVerbs), pick(synthNouns)
		name := fmt.Sprintf("%s_%s_%s_%d", verb, noun, strings.ReplaceAll(pick(synthAttrs), " ", "_"), i)
		desc := fmt.Sprintf("%s a %s in the %s %s. Returns the %s %s and %s.",
			strings.ToUpper(verb[:1])+verb[1:], noun, strings.ToUpper(svc[:1])+svc[1:], pick(synthSystems), noun, pick(synthAttrs), pick(synthAttrs))
		props := map[string]any{
			noun + "_id": map[string]any{"type": "string", "description": fmt.Sprintf("Identifier of the %s", noun)},
			"limit":      map[string]any{"type": "integer", "description": "Maximum number of results"},
		}
		if rng.IntN(3) == 0 {
			props["filter"] = map[string]any{"type": "object", "properties": map[string]any{
				pick(synthAttrs): map[string]any{"type": "string", "description": "Only " + pick(synthNouns) + " records with this value"},
			}}
		}
		tool, err := json.Marshal(map[string]any{"name": name, "description": desc, "inputSchema": map[string]any{"type": "object", "properties": props}})
		if err != nil {
			panic(err)
		}
		out[i] = realTool{key: svc + "_" + name, tool: string(tool)}
	}
	return out
}

// catalogue returns the real tools followed by n distractors, as documents.
func catalogue(n int) []Doc {
	tools := append(append([]realTool(nil), realTools...), synthTools(n)...)
	docs := make([]Doc, len(tools))
	for i, t := range tools {
		docs[i] = DocFromTool(t.key, json.RawMessage(t.tool))
	}
	return docs
}
