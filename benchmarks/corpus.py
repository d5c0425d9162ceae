"""A deterministic generator of realistic memory texts and recall queries.

Not a test. The benchmarks need text whose FTS5 doclists and hashed vectors look
like an agent's real memories rather than a 50-word vocabulary: several thousand
distinct words with a Zipf-like skew (a few words are common, most are rare),
sentences of 8 to 40 words built from templates for each memory type
(preference, decision, incident, procedure, episode, fact, constraint), and
fillers drawn from the word lists below (people, cities, tools, services,
nouns, verbs, dates, versions, ticket numbers, synthesised project code names).

Memory ``i`` depends only on ``(seed, i)``, so any record of a million-record
store can be regenerated without holding the others. Queries come in three
kinds: ``overlap`` (shares 1 to 3 content words with one memory), ``paraphrase``
(asks about a memory in other words, keeping only some of its names) and
``miss`` (words that occur nowhere in the corpus).

Usage: ``from corpus import Corpus; Corpus(seed=7).items(0, 1000)``; run this file
to print a sample and the vocabulary size.
"""

from __future__ import annotations

import bisect
import itertools
import random
import re
import string
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

__all__ = ["Corpus", "Memory", "Query", "vocabulary"]

# --- word lists ---------------------------------------------------------------------

FIRST_NAMES = """
aaron abigail adam adrian aisha alan albert alex alice amara amelia ana andre andrea
angela anna anton arjun arthur astrid ava beatriz ben bianca boris brian bruno carla
carlos carmen caroline chen chloe chris clara colin dana daniel david diana diego dmitri
elena eli elias emil emily emma eric erik esther ethan eva fatima felix fiona francesca
frank freya gabriel george gina grace greta hana hannah harry hector helen henry hugo
ian ibrahim ingrid irene isaac isabel ivan jack jacob james jana jasmine javier jenna
jesse joan johan jonas jorge jose julia julian kai karen karim kate kenji kevin kim
klara lara laura lea leo leon liam lina linda lucas lucia luis maja marco maria marie
mark marta martin mateo max maya mei mia michael miguel mila milan mina nadia naomi
nathan nico nina noah nora olga oliver omar oscar owen pablo paula pedro peter priya
rachel rafael rahul raj rosa ruben ruth sam samir sara sean sebastian selma sergei
simon sofia sophie stefan susan tara theo thomas tim tobias tomas una valentina vera
victor viktor wei will yara yusuf zara zoe
"""
LAST_NAMES = """
abbott alvarez andersen bauer becker bergstrom bianchi brandt brooks castillo chavez
cohen costa dalton delgado dubois eriksson fischer fontaine garcia gomez graham gupta
hansen hartmann hayes herrera hoffmann holm ito jansen jensen kapoor keller kim kowalski
kramer kumar larsen laurent lehmann lindqvist lopez maier marino martins meyer mendes
moreau morales muller nakamura navarro nguyen nielsen novak okafor olsen ortiz park
patel pereira petrov popescu quinn ramos reyes richter rossi russo santos schmidt
schneider schulz silva singh sorensen suzuki tanaka torres vargas vasquez vogel wagner
walsh weber weiss wolf yamamoto zhang ziegler bergman castro dimitrov fernandes haas
ivanova jovanovic kaur lund mazur novotny okonkwo petersen rahman sato takahashi
"""
CITIES = """
amsterdam athens austin bangalore barcelona beijing berlin bogota boston brisbane
brussels budapest buenos cairo calgary cape chicago copenhagen dallas delhi denver
dubai dublin edinburgh florence frankfurt geneva glasgow gothenburg hamburg hanoi
helsinki hong houston istanbul jakarta johannesburg krakow kyoto lagos lima lisbon
london lyon madrid malmo manchester manila marseille melbourne mexico miami milan
montreal moscow mumbai munich nairobi naples oslo osaka ottawa paris perth porto
prague quito reykjavik riga rome rotterdam salzburg santiago seattle seoul seville
shanghai singapore sofia stockholm stuttgart sydney taipei tallinn tokyo toronto turin
utrecht valencia vancouver venice vienna vilnius warsaw wellington zagreb zurich leeds
bristol nantes bordeaux bologna graz ghent leipzig dresden cologne bremen aarhus bergen
tampere tartu kaunas gdansk wroclaw brno bratislava ljubljana split sarajevo belgrade
"""
TOOLS = """
vim emacs vscode neovim intellij pycharm xcode git mercurial docker podman kubernetes
helm terraform ansible puppet chef jenkins circleci buildkite github gitlab bitbucket
jira linear trello notion confluence slack teams zoom figma sketch postman insomnia
curl wget grafana prometheus datadog sentry pagerduty opsgenie splunk kibana
elasticsearch opensearch logstash fluentd vector loki tempo jaeger zipkin honeycomb
postgres mysql mariadb sqlite redis memcached cassandra mongodb dynamodb cockroachdb
clickhouse snowflake bigquery redshift duckdb kafka rabbitmq nats pulsar celery airflow
dagster prefect spark flink beam dbt pandas polars numpy scipy pytorch tensorflow jax
sklearn xgboost lightgbm pytest unittest hypothesis tox nox poetry pipenv conda uv ruff
black flake8 mypy pyright eslint prettier webpack vite rollup esbuild babel typescript
react vue svelte angular nextjs remix django flask fastapi rails sinatra laravel spring
quarkus micronaut gradle maven bazel buck cmake ninja make clang gcc rustc cargo go
deno node bun npm yarn pnpm homebrew apt nix tmux zsh fish bash iterm alacritty kitty
wezterm obsidian logseq zotero excel sheets tableau looker metabase superset streamlit
jupyter colab vault consul nomad envoy istio linkerd nginx haproxy traefik caddy
cloudflare fastly akamai netlify vercel heroku fly render lambda fargate cloudrun
argocd flux spinnaker tekton sonarqube snyk dependabot renovate trivy falco wireguard
openvpn tailscale okta auth0 keycloak ldap saml oauth stripe twilio sendgrid mailgun
"""
SERVICE_WORDS = """
billing ledger checkout cart catalog pricing invoice payment payout refund ledgerline
auth identity session token profile account onboarding signup login search ranking
recommend feed timeline notification email sms push inbox chat messaging presence
media upload thumbnail transcode storage archive backup snapshot export import sync
analytics metrics events tracking ingest pipeline etl warehouse reporting dashboard
audit compliance consent privacy risk fraud scoring underwriting claims policy quote
inventory warehouse shipping fulfillment routing dispatch tracking returns supplier
booking reservation calendar scheduler reminder task workflow approval review comment
geocode maps location weather forecast translation localization content cms wiki
gateway proxy edge cdn dns certificate secrets config flags experiment rollout
deploy build release artifact registry mirror cache queue broker stream webhook
partner vendor tenant org team member role permission license subscription plan
usage quota ratelimit throttle health status incident oncall alerting paging runbook
"""
COMPONENTS = """
api worker gateway service daemon cron job consumer producer scheduler indexer
crawler cache proxy adapter bridge sidecar operator controller agent collector
exporter frontend backend console portal cli sdk lib
"""
NOUNS = """
budget deadline meeting offsite roadmap milestone sprint retro standup demo launch
migration rewrite refactor cleanup upgrade downgrade rollback outage latency throughput
timeout retry backoff deadlock race leak regression bug patch hotfix feature flag
contract renewal invoice quote discount customer client partner vendor supplier
allergy peanuts gluten lactose coffee tea espresso matcha breakfast lunch dinner
birthday anniversary wedding vacation holiday trip flight train hotel apartment lease
rent mortgage insurance doctor dentist appointment prescription therapy gym yoga
running cycling swimming climbing hiking skiing surfing tennis football basketball
guitar piano violin drums singing painting drawing photography pottery knitting
garden balcony kitchen office desk monitor keyboard mouse headset laptop tablet phone
charger battery printer router modem cable adapter dongle webcam microphone speaker
schema table column index query transaction lock replica shard partition cluster node
container image volume network subnet firewall certificate key secret password token
endpoint route handler middleware payload header cookie session cache queue topic
message event stream batch window watermark checkpoint snapshot backup restore
dashboard alert threshold metric trace span log sample histogram percentile quota
release version changelog tag branch commit merge rebase conflict review approval
ticket issue epic story estimate priority severity incident postmortem runbook
playbook checklist template policy guideline standard convention style lint format
test fixture mock stub benchmark profile flamegraph heap stack thread process core
memory disk bandwidth packet socket port protocol handshake encryption signature
hash checksum compression serialization parser tokenizer compiler linker runtime
library package dependency lockfile registry mirror proxy tunnel bastion vpn
architecture diagram proposal decision tradeoff constraint requirement risk estimate
hiring interview onboarding mentoring feedback promotion review salary equity bonus
conference talk workshop paper article blog newsletter podcast video course book
recipe grocery market bakery restaurant cafe pizza sushi ramen tacos curry salad soup
dog cat puppy kitten vet walk park beach lake mountain forest river island village
neighbor landlord plumber electrician mechanic accountant lawyer banker broker agent
car bike scooter bus tram subway ferry taxi parking garage license permit visa passport
school university degree thesis exam grade semester class teacher student tutor
daughter son sister brother mother father grandmother grandfather cousin aunt uncle
friend colleague manager director founder investor advisor mentor coach roommate
weekend morning afternoon evening night sunrise sunset season spring summer autumn
winter rain snow storm heatwave humidity pollen allergy cold flu fever headache
spreadsheet report summary memo minutes agenda invite reminder deadline calendar
shortcut keybinding theme font colorscheme terminal shell prompt alias plugin macro
accessibility contrast darkmode lightmode layout sidebar toolbar palette cursor
"""
VERBS = """
migrate deploy rollback upgrade patch refactor rewrite split merge archive delete
rename document review approve reject schedule cancel postpone book reserve order buy
sell renew negotiate hire interview train mentor onboard offboard automate monitor
alert page escalate investigate reproduce debug profile benchmark optimize cache shard
replicate partition index vacuum compact rotate encrypt decrypt sign verify audit
backup restore snapshot export import sync publish subscribe retry throttle limit
pin unpin bump freeze thaw tag release ship launch announce demo present write draft
edit proofread translate summarize plan estimate prioritize triage assign reassign
close reopen label comment mention invite remind call email text visit cook bake clean
repair replace install uninstall configure reconfigure enable disable toggle test
validate lint format compile build package containerize provision decommission scale
resize tune measure compare evaluate choose prefer avoid skip keep drop move copy
"""
PAST = """
failed crashed stalled timed spiked dropped leaked hung deadlocked degraded flapped
overflowed corrupted rejected throttled retried restarted recovered paged alerted
regressed broke stopped slowed exploded froze misrouted duplicated dropped truncated
expired evicted saturated starved drifted diverged desynced stuck looped
"""
ADJECTIVES = """
slow fast flaky stable brittle robust legacy modern noisy quiet stale fresh broken
healthy urgent minor major critical blocking optional strict lenient verbose terse
cheap expensive heavy light large small tiny huge remote local shared private public
internal external manual automatic nightly weekly monthly quarterly annual daily
hourly cold warm hot dark bright quick careful sloppy clean messy readable obscure
async sync blocking idempotent stateless stateful durable ephemeral transient
persistent partial complete incremental full missing duplicate orphaned dangling
outdated deprecated experimental beta stable canary primary secondary standby
regional global multi single redundant isolated dedicated vegetarian vegan spicy
sweet bitter quiet loud early late recent previous upcoming overdue pending blocked
"""
FOODS = """
pasta pizza sushi ramen pho tacos burrito curry dal biryani falafel hummus shawarma
kebab paella risotto gnocchi lasagna dumplings bao noodles tofu tempeh salad soup stew
chili pancakes waffles oatmeal granola yogurt croissant bagel sourdough baguette
cheese olives tapas empanadas ceviche poke bibimbap kimchi bulgogi udon tempura katsu
schnitzel goulash pierogi borscht moussaka souvlaki tzatziki gelato tiramisu cheesecake
brownies cookies muffins scones chocolate mango avocado berries cherries peaches figs
"""
ACTIVITIES = """
coding debugging writing reading reviewing planning presenting journaling sketching
note-taking drafting refactoring testing deploying pairing mentoring interviewing
commuting traveling running cycling swimming hiking climbing yoga meditation cooking
baking gardening photography painting gaming streaming podcasting emailing budgeting
scheduling researching prototyping designing modeling analyzing monitoring on-call
"""
PLACES = """
office cafe library coworking park gym studio airport station hotel lobby kitchen
garden balcony rooftop basement warehouse lab datacenter conference offsite clinic
pharmacy supermarket bakery restaurant bar pub cinema museum gallery theater stadium
beach harbor marina campsite cabin chalet villa apartment dorm campus
"""
TEAMS = """
platform infra payments growth search data ml security identity mobile web desktop
devex sre billing support sales marketing finance legal design research product ops
"""
MONTHS = """
january february march april may june july august september october november december
"""
WEEKDAYS = "monday tuesday wednesday thursday friday saturday sunday"

_ONSETS = "b br c d dr f g gr h j k kl l m n p pr qu r s st t tr v w z".split()
_VOWELS = "a e i o u ae ia io ou".split()
_CODAS = ["", "n", "r", "s", "x", "th", "l", "m", "nd", "rk"]

# --- templates --------------------------------------------------------------------
# A placeholder's name, trailing digits removed, names its filler (see _FILLERS).

TEMPLATES: Mapping[str, tuple[str, ...]] = {
    "preference": (
        "{first} prefers {tool} over {tool2} for {activity} because it is {adj}.",
        "{first} {last} likes {food} for lunch and avoids {food2} on {weekday}.",
        "For {activity}, {first} wants the {adj} {noun} setup with {tool} and {tool2}.",
        "{first} prefers {adj} {noun} in {tool}; {pronoun} finds the {adj2} one distracting.",
        "{first} would rather meet at the {place} in {city} than at the {place2}.",
        "When {activity}, {first} always keeps {tool} open next to the {noun} {noun2}.",
    ),
    "decision": (
        "We decided to {verb} the {service} to {tool} after the {noun} review on {date}; "
        "{first} owns the {noun2}.",
        "The {team} team chose {tool} over {tool2} for the {service} because of {adj} "
        "{noun} and {noun2} costs.",
        "Decision {ticket}: keep {project} on {tool} {version} until the {noun} {noun2} is {adj}.",
        "{first} {last} approved moving {project} {noun} from {city} to {city2} by {month}.",
        "After {n} days of {noun} tests we will {verb} {service} and drop {tool}.",
    ),
    "incident": (
        "On {date} the {service} {past} for {n} minutes after a {tool} {noun} change; "
        "root cause was a {adj} {noun2} in {project}.",
        "Incident {ticket}: {service} latency {past} to {n} ms during the {noun} rollout in "
        "{city}; {first} rolled back {tool} {version}.",
        "{project} {host} {past} at {hour} because the {noun} {noun2} was {adj}; "
        "{first} paged the {team} team.",
        "Outage on {weekday}: {service} {past} when {tool} hit the {noun} limit of {n}.",
        "The {adj} {noun} in {service} {past} twice in {month}; postmortem {ticket} by "
        "{first} {last}.",
    ),
    "procedure": (
        "To {verb} the {service}: run {tool} {verb2}, then {verb3} the {noun}, and check "
        "{noun2} in {tool2}.",
        "Release steps for {project}: bump to {version}, {verb} the {noun}, tag, and "
        "announce in {tool}.",
        "When {service} {past}, restart {host}, {verb} the {noun} cache and open {ticket}.",
        "Before {activity}, {first} runs {tool} with the {adj} {noun} profile and {tool2}.",
        "Rotate the {noun} for {service} every {n} days using {tool}; {team} owns it.",
    ),
    "episode": (
        "{first} and {first2} talked about {noun} and {noun2} at the {place} in {city} on {date}.",
        "{first} mentioned that {pronoun} is {verbing} {noun} for {project} and feels "
        "{adj} about it.",
        "During the {team} sync, {first} {last} asked about the {adj} {noun} in {service}.",
        "{first} flew to {city} for the {noun} {noun2} and tried {food} at a {place}.",
        "Yesterday {first} spent {n} hours {activity} with {first2} on the {project} {noun}.",
        "{first} said the {noun} at the {place} was {adj} and the {food} was {adj2}.",
    ),
    "fact": (
        "{first} {last} lives in {city} and works on {project} in the {team} team.",
        "{project} runs on {tool} {version} with {n} {noun} nodes in {city}.",
        "The {service} stores {noun} in {tool} and {noun2} in {tool2}.",
        "{first}'s {relative} is called {first2} and loves {food}.",
        "{host} hosts the {service} and the {adj} {noun} for {project}.",
    ),
    "constraint": (
        "{project} must use {tool} for {noun}; {tool2} is not allowed.",
        "Never {verb} {service} on {weekday} without approval from {first}.",
        "All {noun} in {project} must be {adj} and reviewed by the {team} team.",
        "{service} may not exceed {n} requests per second per {noun}.",
    ),
}
# Optional follow-up sentences, so memories run from about 8 to 40 words.
TAILS = (
    "Follow up with {first} by {date}.",
    "See {ticket} for the {adj} details.",
    "{first} thinks the {noun} could also help {project} next {month}.",
    "This came up again during the {team} review of {service} and the {noun} budget.",
    "Related: the {adj} {noun} work in {city} and the {tool} {noun2} migration.",
    "Not urgent, but {first} {last} wants it settled before the {noun} in {month}.",
)
TAIL_CHANCES = (0.45, 0.15)  # chance of a first tail, then of a second
TYPE_WEIGHTS: Mapping[str, float] = {
    "preference": 0.16,
    "decision": 0.14,
    "incident": 0.12,
    "procedure": 0.10,
    "episode": 0.30,
    "fact": 0.12,
    "constraint": 0.06,
}
ZIPF_EXPONENT = 0.75  # the r-th most common word of a list has weight 1 / r**0.75
KEYED_SHARE = 0.35  # of preference, fact and constraint memories
OVERLAP_FRAMES = (
    "what do we know about {0}?",
    "{0}",
    "anything about {0} and {1}?",
    "remind me about {0} {1}",
    "notes on {0}, {1} and {2}",
    "what happened with {0} {1} {2}?",
    "tell me about the {0} {1}",
)
PARAPHRASES: Mapping[str, tuple[str, ...]] = {
    "preference": (
        "which tool does {first} like best?",
        "what does {first} enjoy eating?",
        "how does {first} like to set things up?",
    ),
    "decision": (
        "why did the team pick {tool}?",
        "what was agreed about {service}?",
        "who signed off on the {project} move?",
    ),
    "incident": (
        "what went wrong with {service}?",
        "why did {project} go down?",
        "was there an outage involving {tool}?",
    ),
    "procedure": (
        "how do I handle {service}?",
        "steps to ship {project}?",
        "what is the routine for {service}?",
    ),
    "episode": (
        "when did {first} chat with {first2}?",
        "what did {first} say recently?",
        "where did {first} travel?",
    ),
    "fact": (
        "where is {first} based?",
        "what powers {project}?",
        "where does {service} keep its data?",
    ),
    "constraint": (
        "any rules for {project}?",
        "is there a limit on {service}?",
        "what are the restrictions around {service}?",
    ),
}
_MISS_WORDS = (
    "xylograph quokka zeppelin umbriel vorticella narwhalite jabberwock ptarmigan "
    "quillwort saxifrage wombatology yttrium zugzwang bumblewick cromulent"
).split()
_FORMATTER = string.Formatter()


def _words(block: str) -> tuple[str, ...]:
    """Distinct words of a whitespace-separated block, first occurrence kept."""
    return tuple(dict.fromkeys(block.split()))


def _codenames(count: int, seed: int) -> tuple[str, ...]:
    """``count`` distinct pronounceable synthetic names (projects, hosts: the long tail)."""
    rng = random.Random(seed)
    names: dict[str, None] = {}
    while len(names) < count:
        parts = rng.randint(2, 3)
        name = "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) for _ in range(parts))
        names[name + rng.choice(_CODAS)] = None
    return tuple(names)


@dataclass(frozen=True, slots=True)
class _Pool:
    """Words with Zipf-like weights (rank order shuffled once, deterministically)."""

    words: tuple[str, ...]
    cumulative: tuple[float, ...]

    @classmethod
    def of(cls, words: Sequence[str], seed: int, exponent: float = ZIPF_EXPONENT) -> _Pool:
        """A pool over ``words`` whose r-th most common word has weight 1 / r**exponent."""
        order = list(words)
        random.Random(seed).shuffle(order)
        weights = [1.0 / (rank + 1) ** exponent for rank in range(len(order))]
        return cls(tuple(order), tuple(itertools.accumulate(weights)))

    def draw(self, rng: random.Random) -> str:
        """One word."""
        x = rng.random() * self.cumulative[-1]
        return self.words[bisect.bisect_right(self.cumulative, x)]


@dataclass(frozen=True, slots=True)
class Memory:
    """One generated memory: what ``remember`` receives, plus the fillers used."""

    index: int
    type: str
    text: str
    key: str | None
    value: str | None
    slots: Mapping[str, str]

    def item(self, observed_at: datetime | None = None) -> dict[str, Any]:
        """The ``remember_many`` item for this memory."""
        item: dict[str, Any] = {"content": self.text, "type": self.type}
        if self.key is not None:
            item["key"], item["value"] = self.key, self.value
        if observed_at is not None:
            item["observed_at"] = observed_at
        return item


@dataclass(frozen=True, slots=True)
class Query:
    """One recall query and the memory it was derived from (None for a miss)."""

    text: str
    kind: str
    source: int | None


class Corpus:
    """Deterministic memories and queries; memory ``i`` depends only on (seed, i)."""

    def __init__(self, seed: int = 7, codenames: int = 3000) -> None:
        self.seed = seed
        names = _codenames(codenames, seed)
        lists = {
            "first": FIRST_NAMES,
            "last": LAST_NAMES,
            "city": CITIES,
            "tool": TOOLS,
            "serviceword": SERVICE_WORDS,
            "component": COMPONENTS,
            "noun": NOUNS,
            "verb": VERBS,
            "past": PAST,
            "adj": ADJECTIVES,
            "food": FOODS,
            "activity": ACTIVITIES,
            "place": PLACES,
            "team": TEAMS,
            "month": MONTHS,
            "weekday": WEEKDAYS,
        }
        self._pools = {k: _Pool.of(_words(v), seed + i) for i, (k, v) in enumerate(lists.items())}
        self._pools["project"] = _Pool.of(names, seed + 99, exponent=0.6)
        self._types = tuple(TYPE_WEIGHTS)
        self._type_cum = tuple(itertools.accumulate(TYPE_WEIGHTS.values()))
        self._fields = {t: [_fields(x) for x in ts] for t, ts in TEMPLATES.items()}

    # -- memories --------------------------------------------------------------------

    def memory(self, index: int) -> Memory:
        """Memory number ``index`` (any non-negative integer)."""
        rng = random.Random(self.seed * 1_000_003 + index)
        kind = self._types[bisect.bisect_right(self._type_cum, rng.random() * self._type_cum[-1])]
        choice = rng.randrange(len(TEMPLATES[kind]))
        slots = {name: self._fill(name, rng) for name in self._fields[kind][choice]}
        text = TEMPLATES[kind][choice].format(**slots)
        key, value = self._key(kind, slots, rng)
        text = " ".join([text, *self._tails(rng)])
        return Memory(index, kind, text[0].upper() + text[1:], key, value, slots)

    def _tails(self, rng: random.Random) -> list[str]:
        """Zero to two follow-up sentences with fresh fillers."""
        tails = []
        for chance in TAIL_CHANCES:
            if rng.random() >= chance:
                break
            template = rng.choice(TAILS)
            tail = template.format(**{f: self._fill(f, rng) for f in _fields(template)})
            tails.append(tail[0].upper() + tail[1:])
        return tails

    def memories(self, start: int, count: int) -> list[Memory]:
        """Memories ``start`` to ``start + count - 1``."""
        return [self.memory(i) for i in range(start, start + count)]

    def items(
        self,
        start: int,
        count: int,
        first_seen: datetime | None = None,
        step: timedelta = timedelta(minutes=7),
    ) -> list[dict[str, Any]]:
        """``remember_many`` items for a range; observed times advance by ``step``."""
        begin = first_seen or datetime(2025, 1, 1, tzinfo=UTC)
        return [m.item(begin + step * n) for n, m in enumerate(self.memories(start, count))]

    def _fill(self, name: str, rng: random.Random) -> str:
        kind = name.rstrip(string.digits)
        special = _FILLERS.get(kind)
        if special is not None:
            return special(self, rng)
        return self._pools[kind].draw(rng)

    def _key(
        self, kind: str, slots: Mapping[str, str], rng: random.Random
    ) -> tuple[str | None, str | None]:
        """A structured key and value for some preference, fact and constraint memories."""
        if kind not in ("preference", "fact", "constraint") or rng.random() >= KEYED_SHARE:
            return None, None
        subject = slots.get("first") or slots.get("project") or slots.get("service") or "x"
        attribute = self._pools["noun"].draw(rng)
        value = next(iter(slots.values()))
        return f"{kind}.{_slug(subject)}.{attribute}", value

    def word(self, pool: str, rng: random.Random) -> str:
        """One word of the list ``pool`` (e.g. ``noun``, ``tool``, ``project``)."""
        return self._pools[pool].draw(rng)

    # -- queries ---------------------------------------------------------------------

    def queries(
        self, count: int, sources: Sequence[int], miss_share: float = 0.1, seed: int = 0
    ) -> list[Query]:
        """``count`` distinct queries about memories drawn from ``sources``.

        About ``miss_share`` are misses; the rest alternate between overlap
        queries (1 to 3 content words of the source memory) and paraphrases.
        """
        rng = random.Random(self.seed * 7_919 + seed)
        seen: dict[str, Query] = {}
        while len(seen) < count:
            query = self._query(rng, sources, miss_share, len(seen))
            seen.setdefault(query.text, query)
        return list(seen.values())

    def _query(self, rng: random.Random, sources: Sequence[int], miss: float, n: int) -> Query:
        if rng.random() < miss:
            words = rng.sample(_MISS_WORDS, rng.randint(1, 3))
            return Query(f"what about {' '.join(words)}?", "miss", None)
        memory = self.memory(rng.choice(sources))
        if n % 2 == 0:
            return Query(_overlap(memory, rng), "overlap", memory.index)
        return Query(_paraphrase(memory, rng), "paraphrase", memory.index)


def _fields(template: str) -> tuple[str, ...]:
    """Placeholder names of a template, in order, without repeats."""
    return tuple(dict.fromkeys(name for _, name, _, _ in _FORMATTER.parse(template) if name))


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "x"


_CONTENT = re.compile(r"[a-z]{3,}(?:-[a-z]+)*")


def _overlap(memory: Memory, rng: random.Random) -> str:
    """A question sharing 1 to 3 content words (filler words) with ``memory``."""
    found = (w for v in memory.slots.values() for w in _CONTENT.findall(v.lower()))
    words = list(dict.fromkeys(found))
    chosen = rng.sample(words, min(len(words), rng.randint(1, 3))) or ["memory"]
    frames = [f for f in OVERLAP_FRAMES if f.count("{") <= len(chosen)]
    frame = rng.choice([f for f in frames if f.count("{") == len(chosen)] or frames)
    return frame.format(*chosen)


def _paraphrase(memory: Memory, rng: random.Random) -> str:
    """A question about ``memory`` in other words, keeping at most one or two names."""
    options = [p for p in PARAPHRASES[memory.type] if all(f in memory.slots for f in _fields(p))]
    if not options:
        return _overlap(memory, rng)
    return rng.choice(options).format(**memory.slots)


def _service(corpus: Corpus, rng: random.Random) -> str:
    return f"{corpus.word('serviceword', rng)}-{corpus.word('component', rng)}"


def _date(corpus: Corpus, rng: random.Random) -> str:
    style = rng.random()
    if style < 0.5:
        return f"2025-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
    if style < 0.8:
        return f"{corpus.word('month', rng).capitalize()} {rng.randint(1, 28)}"
    return f"last {corpus.word('weekday', rng)}"


_TICKETS = ("OPS", "INC", "DEV", "SEC", "DATA")
_FILLERS: Mapping[str, Callable[[Corpus, random.Random], str]] = {
    "first": lambda c, r: c.word("first", r).capitalize(),
    "last": lambda c, r: c.word("last", r).capitalize(),
    "city": lambda c, r: c.word("city", r).capitalize(),
    "project": lambda c, r: c.word("project", r).capitalize(),
    "service": _service,
    "date": _date,
    "host": lambda c, r: f"{c.word('project', r)}-{r.randint(1, 48):02d}",
    "ticket": lambda c, r: f"{r.choice(_TICKETS)}-{r.randint(100, 9999)}",
    "version": lambda c, r: f"{r.randint(0, 9)}.{r.randint(0, 30)}.{r.randint(0, 15)}",
    "n": lambda c, r: str(r.choice((2, 3, 5, 8, 10, 12, 15, 20, 30, 45, 60, 90, 120, 500))),
    "hour": lambda c, r: f"{r.randint(0, 23):02d}:{r.choice(('00', '15', '30', '45'))}",
    "pronoun": lambda c, r: r.choice(("she", "he", "they")),
    "relative": lambda c, r: r.choice(("sister", "brother", "daughter", "son", "partner")),
    "verbing": lambda c, r: r.choice(
        ("reviewing", "migrating", "planning", "testing", "rewriting", "debugging", "documenting")
    ),
}


def vocabulary(corpus: Corpus, count: int) -> dict[str, float]:
    """Sanity figures over the first ``count`` memories: distinct words (all, and
    alphabetic only), mean words per memory, and the share of the most common word."""
    frequency: Counter[str] = Counter()
    lengths = 0
    for memory in corpus.memories(0, count):
        words = set(re.findall(r"[a-z0-9]+", memory.text.lower()))
        lengths += len(memory.text.split())
        frequency.update(words)
    alphabetic = [w for w in frequency if w.isalpha()]
    return {
        "distinct": len(frequency),
        "distinct_alphabetic": len(alphabetic),
        "mean_words": lengths / count,
        "top_word_doc_share": frequency.most_common(1)[0][1] / count,
    }


if __name__ == "__main__":
    sample = Corpus()
    for m in sample.memories(0, 12):
        print(f"{m.type:<11} {m.key or '-':<40} {m.text}")
    for q in sample.queries(12, range(1000)):
        print(f"{q.kind:<11} {q.text}")
    print("20,000 memories:", vocabulary(sample, 20_000))
