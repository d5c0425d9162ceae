"""The dashboard end to end in headless Chromium: a person pastes a key, picks a user,
browses, filters, corrects, retracts and deletes memories, runs a recall and reads the
audit log; every change is checked in the store through the SDK, every screen is
saved as a screenshot, and hostile memories render as inert text."""

from __future__ import annotations

import json
from typing import Any

import pytest
from dashboard_support import HOSTILE, HOSTILE_USER, TENANT, Dash, Ui, ctx, see

from engram.errors import NotFound

ACME_USERS = sorted(["alice", "bob", "carol", "mallory", HOSTILE_USER])


def _options(ui: Ui) -> list[str]:
    values: list[str] = ui.page.eval_on_selector_all("#user option", "os => os.map(o => o.value)")
    return values


def _rows(ui: Ui) -> Any:
    return ui.page.locator("#memory-table tbody tr")


def _confirm(ui: Ui, text: str | None = None) -> None:
    """Fill the open dialog (when it asks for text) and confirm it."""
    see(ui.page.locator("#edit")).to_be_visible()
    if text is not None:
        ui.page.fill("#edit-text", text)
    ui.page.click("#edit-ok")
    see(ui.page.locator("#edit")).to_be_hidden()


def test_a_wrong_key_is_refused_and_an_admin_picks_among_its_tenants_users(
    ui: Ui, dash: Dash
) -> None:
    ui.open()
    ui.page.fill("#key", "egm_0123456789abcdef_not-a-real-secret")
    ui.page.click("#login button[type=submit]")
    see(ui.page.locator("#error")).to_contain_text("This key was not accepted")
    see(ui.page.locator("#tabs")).to_be_hidden()
    assert ui.page.evaluate("() => sessionStorage.getItem('engram-key')") is None
    ui.shot("01-wrong-key")
    ui.login("admin")
    see(ui.page.locator("#who")).to_contain_text(f"tenant {TENANT}")
    see(ui.page.locator("#who")).to_contain_text("admin")
    assert _options(ui) == ACME_USERS  # the tenant's users, never another tenant's
    assert "globex-only-user" not in ui.page.content()
    assert ui.page.input_value("#key") == ""  # the key is not left in the page
    assert ui.page.evaluate("() => sessionStorage.getItem('engram-key')") == dash.keys["admin"]
    assert ui.page.evaluate("() => localStorage.length") == 0
    see(_rows(ui).first).to_be_visible()
    ui.shot("02-admin-user-picker")
    ui.page.reload()  # the key lasts as long as the tab
    see(ui.page.locator("#tabs")).to_be_visible()
    ui.page.click("#logout")
    see(ui.page.locator("#tabs")).to_be_hidden()
    assert ui.page.evaluate("() => sessionStorage.getItem('engram-key')") is None
    ui.assert_clean()


def test_each_key_picks_only_the_users_it_may_see(ui: Ui) -> None:
    ui.login("scoped")
    assert _options(ui) == ["alice", "bob"]
    ui.login("other")
    assert _options(ui) == ["globex-only-user"]
    see(ui.page.locator("#who")).to_contain_text("tenant globex")
    see(_rows(ui)).to_have_count(1)
    see(_rows(ui)).to_contain_text("Globex ships on Mondays.")
    ui.login("plain")  # may act for any user it names, may not list them
    see(ui.page.locator("#identity-help")).to_contain_text("needs an admin key")
    see(ui.page.locator("#user-typed")).to_be_visible()
    ui.page.fill("#user-typed", "bob")
    ui.page.click("#identity button[type=submit]")
    see(_rows(ui)).to_have_count(3)  # bob's two and the tenant-wide one
    ui.shot("03-plain-key-typed-user")
    ui.login("agent")
    see(ui.page.locator("#identity-help")).to_contain_text("only for agents coder")
    assert ui.page.input_value("#agent") == "coder"
    ui.page.click("#tabs button[data-tab=audit]")
    see(ui.page.locator("#error")).to_contain_text("cannot read a user's audit log")
    ui.assert_clean()


def test_filters_by_type_and_status_on_the_server_and_scope_and_time_on_the_page(
    ui: Ui,
) -> None:
    ui.login("admin")
    ui.pick_user("alice")
    rows = _rows(ui)
    see(rows).to_have_count(3)  # active: two of alice's and the tenant-wide one
    see(ui.page.locator("#count")).to_have_text("3 shown of 3 loaded")
    ui.page.fill("#filters input[name=type]", "preference")
    ui.page.click("#filters button[type=submit]")
    see(rows).to_have_count(1)
    see(rows).to_contain_text("dark mode")
    ui.page.fill("#filters input[name=type]", "")
    ui.page.select_option("#filters select[name=status]", "retracted")
    ui.page.click("#filters button[type=submit]")
    see(rows).to_have_count(1)
    see(rows).to_contain_text("release train")
    ui.page.select_option("#filters select[name=status]", "all")
    ui.page.click("#filters button[type=submit]")
    see(rows).to_have_count(4)
    ui.page.select_option("#filters select[name=scope]", "global")
    see(rows).to_have_count(1)
    see(rows).to_contain_text("closed on 24 December")
    ui.page.select_option("#filters select[name=scope]", "")
    ui.page.fill("#filters input[name=from]", "2024-05-01")
    ui.page.click("#filters button[type=submit]")
    see(rows).to_have_count(2)  # observed 2024-06-10 and today (2024-07-01)
    ui.page.fill("#filters input[name=from]", "")
    ui.page.fill("#filters input[name=to]", "2024-02-01")
    ui.page.click("#filters button[type=submit]")
    see(rows).to_have_count(1)
    see(rows).to_contain_text("PostgreSQL 16")
    see(ui.page.locator("#count")).to_have_text("1 shown of 4 loaded")
    ui.shot("04-filters")
    ui.assert_clean()


def test_correct_retract_and_delete_through_the_confirmation_dialog(ui: Ui, dash: Dash) -> None:
    bob, tz = ctx("bob"), dash.ids["tz"]
    ui.login("admin")
    ui.pick_user("bob")
    _rows(ui).filter(has_text="Europe/Paris").click()
    see(ui.page.locator("#timeline li")).to_have_count(1)
    ui.page.click("#act-correct")
    see(ui.page.locator("#edit")).to_be_visible()
    ui.shot("05-correct-dialog")
    ui.page.click("#edit-cancel")  # a cancelled dialog changes nothing
    see(ui.page.locator("#edit")).to_be_hidden()
    assert [r.id for r in dash.mem.history(bob, tz)] == [tz]
    ui.page.click("#act-correct")
    _confirm(ui, "My timezone is Asia/Tokyo.")
    see(ui.page.locator("#notice")).to_contain_text("version 2 is now the active one")
    timeline = ui.page.locator("#timeline li")
    see(timeline).to_have_count(2)
    see(timeline.nth(0)).to_contain_text("v1 · superseded")
    see(timeline.nth(0)).to_contain_text("Europe/Paris")
    see(timeline.nth(1)).to_contain_text("v2 · active")
    see(timeline.nth(1)).to_contain_text("Asia/Tokyo")
    ui.shot("06-timeline-after-correction")
    chain = dash.mem.history(bob, tz)
    assert [(r.version, r.status.value) for r in chain] == [(1, "superseded"), (2, "active")]
    assert chain[1].content == "My timezone is Asia/Tokyo."
    ui.page.click("#act-retract")
    _confirm(ui, "I moved back to Paris")
    see(ui.page.locator("#notice")).to_contain_text("Retracted")
    see(timeline.nth(1)).to_contain_text("v2 · retracted")
    see(ui.page.locator("#act-correct")).to_be_disabled()
    assert dash.mem.get(bob, chain[1].id).status.value == "retracted"
    _rows(ui).filter(has_text="vault path").click()
    see(ui.page.locator("#detail-content")).to_contain_text("vault path")
    ui.page.click("#act-delete")
    see(ui.page.locator("#edit-text")).to_be_hidden()
    ui.shot("07-delete-confirmation")
    _confirm(ui)
    see(ui.page.locator("#notice")).to_contain_text("Deleted 1 version(s)")
    see(ui.page.locator("#notice")).to_contain_text("verified gone")
    see(_rows(ui).filter(has_text="vault path")).to_have_count(0)
    with pytest.raises(NotFound):
        dash.mem.get(bob, dash.ids["vpn"])
    ui.shot("08-after-delete")
    ui.assert_clean()


def test_recall_draws_the_funnel_the_score_bars_and_the_rejections(ui: Ui) -> None:
    ui.login("admin")
    ui.pick_user("carol")
    ui.page.click("#tabs button[data-tab=recall]")
    ui.page.fill("#recall-form input[name=query]", "Which editor do I use?")
    with ui.page.expect_response("**/v1/recall") as answer:
        ui.page.click("#recall-form button[type=submit]")
    result = answer.value.json()
    trace = result["trace"]
    see(ui.page.locator("#recall-out")).to_be_visible()
    see(ui.page.locator("#recall-status")).to_have_text(result["status"])
    assert ui.page.text_content("#recall-prompt") == result["prompt"]
    assert "My editor is Emacs." in result["prompt"]
    stages = ui.page.locator("#funnel [data-stage]")
    see(stages).to_have_count(len(trace["stages"]))
    for n, stage in enumerate(trace["stages"]):
        see(stages.nth(n)).to_contain_text(f"{stage['name']}{stage['in']} → {stage['out']}")
    widest = ui.page.eval_on_selector(
        "#funnel [data-stage=candidates] .meter span", "s => s.getBoundingClientRect().width"
    )
    assert widest > 0
    assert trace["selected"]
    for item in trace["selected"]:
        card = ui.page.locator(f"#components .item[data-id='{item['id']}']")
        drawn = [name for name, value in item["components"].items() if value != 0]
        see(card.locator("[data-component]")).to_have_count(len(drawn))
        see(card).to_contain_text(f"score {item['score']:.3f}")
    assert trace["rejection_counts"]  # carol's superseded Vim is seen and turned away
    for reason, count in trace["rejection_counts"].items():
        see(ui.page.locator(f"#rejections [data-reason='{reason}']")).to_contain_text(str(count))
    ui.shot("09-recall-trace")
    ui.assert_clean()


def test_the_audit_tab_lists_ids_and_reasons_newest_first(ui: Ui, dash: Dash) -> None:
    ui.login("admin")
    ui.pick_user("alice")
    ui.page.click("#tabs button[data-tab=audit]")
    rows = ui.page.locator("#audit-table tbody tr")
    see(rows).to_have_count(4)
    operations = [rows.nth(n).locator("td").nth(3).inner_text() for n in range(4)]
    assert operations == ["RETRACT", "ADD", "ADD", "ADD"]
    see(rows.nth(0)).to_contain_text(dash.ids["train"])
    table = ui.page.inner_text("#audit-table")
    assert "PostgreSQL" not in table  # ids and reason codes, never content
    assert "Thursdays" not in table
    see(ui.page.locator("#audit-count")).to_have_text("4 of 4 entries shown.")
    ui.shot("10-audit-log")
    ui.assert_clean()


def test_hostile_memories_render_as_inert_text_on_every_screen(ui: Ui, dash: Dash) -> None:
    page = ui.page
    ui.login("admin")
    ui.pick_user("mallory")
    rows = _rows(ui)
    see(rows).to_have_count(len(HOSTILE) + 1)  # and the tenant-wide one
    listed = page.inner_text("#memory-table")
    for text in HOSTILE:
        assert text in listed  # shown literally, as typed
    ui.shot("11-hostile-list")
    rows.filter(has_text="onerror").click()
    see(page.locator("#detail-content")).to_have_text(HOSTILE[1])
    page.click("#act-correct")
    _confirm(ui, '<svg id="svg" onload="window.__pwned=6"></svg> My theme is light.')
    see(page.locator("#timeline li")).to_have_count(2)
    see(page.locator("#timeline li").nth(0)).to_contain_text(HOSTILE[1])
    ui.shot("12-hostile-timeline")
    page.click("#tabs button[data-tab=recall]")
    page.fill("#recall-form input[name=query]", "deploy script, editor theme, build and CI")
    with page.expect_response("**/v1/recall") as answer:
        page.click("#recall-form button[type=submit]")
    prompt = answer.value.json()["prompt"]
    see(page.locator("#recall-out")).to_be_visible()
    assert page.text_content("#recall-prompt") == prompt
    assert "</memory>" in prompt
    ui.shot("13-hostile-recall")
    page.click("#tabs button[data-tab=audit]")
    see(page.locator("#audit-table tbody tr").first).to_be_visible()
    page.select_option("#user", HOSTILE_USER)  # a user id that is itself markup
    page.click("#tabs button[data-tab=memories]")
    see(rows).to_have_count(2)
    assert HOSTILE_USER in page.inner_text("#user")
    ui.shot("14-hostile-user-id")
    dom = page.evaluate(
        """() => ({scripts: [...document.scripts].map(s => s.getAttribute("src")),
                   injected: document.querySelectorAll(
                     "#injected, #framed, #svg, iframe, svg, img, memory, memories, system, b, a,"
                     + " details"
                   ).length})"""
    )
    assert dom == {"scripts": ["app.js"], "injected": 0}
    stored = dash.mem.list(ctx("mallory"), status=None, limit=100)
    assert {r.content for r in stored} >= set(HOSTILE[:1] + HOSTILE[2:])
    ui.assert_clean()
    print(json.dumps({"console": ui.console}))
