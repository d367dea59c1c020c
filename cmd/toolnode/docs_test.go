package main

// The project's Markdown pages, checked as a reader follows them: every
// relative link names a file that exists and every #anchor a heading of
// the page it points into, and no page grows past what one reads whole.

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// maxDocLines is the longest a Markdown page of the project may be.
const maxDocLines = 800

// docPages are the Markdown files checked, relative to the repository's
// root: the top-level pages, docs/ and deploy/.
func docPages(t *testing.T, root string) []string {
	t.Helper()
	var pages []string
	for _, pattern := range []string{"*.md", "docs/*.md", "docs/*/*.md", "deploy/*.md"} {
		m, err := filepath.Glob(filepath.Join(root, pattern))
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, m...)
	}
	if len(pages) == 0 {
		t.Fatal("no Markdown pages found")
	}
	return pages
}

var (
	// mdLink is an inline link or image: [text](target) or [text](target "title").
	mdLink = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	// fence opens or closes a code block.
	fence = regexp.MustCompile("^\\s*```")
	// codeSpan is inline code.
	codeSpan = regexp.MustCompile("`[^`]*`")
)

// prose returns the lines of a Markdown page with those of its code
// blocks blanked, so that the index of a line is its number less one.
func prose(text string) []string {
	lines := strings.Split(text, "\n")
	in := false
	for i, line := range lines {
		if fence.MatchString(line) {
			in = !in
			lines[i] = ""
		} else if in {
			lines[i] = ""
		}
	}
	return lines
}

// anchors returns the anchors GitHub makes of a page's headings: lower
// case, punctuation dropped, spaces as hyphens, a repeated one numbered.
func anchors(text string) map[string]bool {
	set := map[string]bool{}
	seen := map[string]int{}
	for _, line := range prose(text) {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.TrimLeft(line, "#")
		if h == "" || h[0] != ' ' {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(h)) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			set[a+"-"+strconv.Itoa(n)] = true
		} else {
			set[a] = true
		}
		seen[a]++
	}
	return set
}

func TestDocLinks(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	texts := map[string]string{}
	read := func(path string) (string, bool) {
		if s, ok := texts[path]; ok {
			return s, true
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return "", false
		}
		texts[path] = string(b)
		return string(b), true
	}
	for _, page := range docPages(t, root) {
		rel, _ := filepath.Rel(root, page)
		text, _ := read(page)
		if n := strings.Count(text, "\n"); n > maxDocLines {
			t.Errorf("%s: %d lines, more than %d: split it by topic", rel, n, maxDocLines)
		}
		for i, line := range prose(text) {
			line = codeSpan.ReplaceAllString(line, "") // code spans are not links
			for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				file, anchor, _ := strings.Cut(target, "#")
				dest := page
				if file != "" {
					dest = filepath.Join(filepath.Dir(page), file)
					if _, err := os.Stat(dest); err != nil {
						t.Errorf("%s:%d: link %q: %v", rel, i+1, target, err)
						continue
					}
				}
				if anchor == "" {
					continue
				}
				if !strings.HasSuffix(dest, ".md") {
					t.Errorf("%s:%d: link %q: an anchor into a file that is not Markdown", rel, i+1, target)
					continue
				}
				destText, _ := read(dest)
				if !anchors(destText)[anchor] {
					t.Errorf("%s:%d: link %q: %s has no heading with anchor #%s", rel, i+1, target, filepath.Base(dest), anchor)
				}
			}
		}
	}
}

func TestAnchors(t *testing.T) {
	t.Parallel()
	got := anchors("# Tools: the `.meta` format\n## 9P over TLS and the proxy\n```\n# not a heading\n```\n## Writes through a follower — where the last tenth goes\n## A\n## A\n")
	for _, want := range []string{"tools-the-meta-format", "9p-over-tls-and-the-proxy", "writes-through-a-follower--where-the-last-tenth-goes", "a", "a-1"} {
		if !got[want] {
			t.Errorf("no anchor %q in %v", want, got)
		}
	}
	if got["not-a-heading"] {
		t.Error("a line in a code block made an anchor")
	}
}
