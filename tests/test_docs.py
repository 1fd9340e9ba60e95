"""The README and the pages of ``docs/`` say only what is there: a README a newcomer reads in five minutes,
every link to a file of the kit (and a heading of it) that exists, every command and path quoted real."""

import re

from conftest import KIT

PAGES = [KIT / "README.md", *sorted((KIT / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def anchors(page) -> set[str]:
    """GitHub's ids of a page's headings: lower case, punctuation dropped, spaces as hyphens."""
    headings = re.findall(r"^#+ (.+)$", page.read_text(), re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-") for heading in headings}


def test_the_readme_is_short_and_links_every_page_of_docs():
    readme = (KIT / "README.md").read_text()
    assert len(readme.splitlines()) <= 150
    linked = {target.split("#")[0] for target in LINK.findall(readme)}
    assert {f"docs/{page.name}" for page in PAGES[1:]} <= linked


def test_every_link_between_the_pages_resolves():
    broken = []
    for page in PAGES:
        for target in LINK.findall(page.read_text()):
            if re.match(r"[a-z]+:", target):
                continue  # a web address
            path, _, anchor = target.partition("#")
            resolved = (page.parent / path).resolve() if path else page
            if not resolved.exists() or (anchor and resolved.suffix == ".md" and anchor not in anchors(resolved)):
                broken.append(f"{page.relative_to(KIT)}: {target}")
    assert broken == []


def test_the_pages_quote_only_commands_and_paths_that_exist():
    """What the pages tell a reader to run or open is there: each `make <target>` is a target of
    the kit's Makefile or of the ones a lab folder and the student bundle get; each path exists."""
    makefiles = [KIT / "Makefile", KIT / "deploy" / "lab" / "Makefile", KIT / "deploy" / "student" / "Makefile"]
    targets = {t for m in makefiles for t in re.findall(r"^([a-z][a-z0-9-]*):", m.read_text(), re.MULTILINE)}
    text = "\n".join(page.read_text() for page in PAGES)
    assert set(re.findall(r"`make ([a-z][a-z0-9-]*)", text)) <= targets
    paths = set(re.findall(r"`((?:autograder|tests|source|deploy|examples|solutions|assignments|\.github|\.ci)/"
                           r"[^`<>*\s]*)`", text))
    assert len(paths) > 20 and sorted(p for p in paths if not (KIT / p.split("::")[0]).exists()) == []


def test_the_design_page_names_every_module_of_the_kit():
    """docs/design.md's layout is where a maintainer finds a module's role: a new module is named there."""
    layout = (KIT / "docs" / "design.md").read_text().split("## Layout", 1)[1].split("\n## ", 1)[0]
    modules = {path.name for path in (KIT / "autograder").rglob("*.py") if path.name not in ("__init__.py", "__main__.py")}
    assert sorted(name for name in modules if f"`{name}`" not in layout) == []
