"""Instruction-like text: does a memory try to steer an agent rather than state a fact?

Asked only of untrusted sources (documents, tools, shares), so deliberately broad:
imperatives that open a sentence (always / never / do not / must / ignore ...) count.
Two tiers of patterns: ``_STRONG`` are injection phrases in English, Spanish, French,
German, Portuguese, Italian, Russian, Chinese and Japanese ("ignore previous
instructions", "ignora las instrucciones anteriores", "忽略之前的所有指令"); ``_BROAD``
are the English imperatives. Every view of ``normalise.views`` is searched.
"""

from __future__ import annotations

import re

from engram.write.detectors.keywords import Vocabulary, Words, casekey, could_match, needed
from engram.write.detectors.normalise import views

__all__ = ["looks_like_instruction"]

_I = re.IGNORECASE
_AUDIENCE = r"(?:the\s+)?(?:user|human|customer|anyone|them|him|her)"
_AI = r"(?:ai|assistant|llm|language\s+model|model|agents?|chatbot)"
_RULES = r"(?:instructions?|prompts?|rules|guidelines|directives|guardrails|restrictions|policies)"
_LOOT = r"(?:passwords?|credentials?|api\s+keys?|tokens?|secrets?|private\s+keys?|chat\s+history)"
_OBEY = r"(?:respond|reply|answer|say|tell|ignore|forget|obey|follow|comply|output|reveal|send)"
_START = r"(?:^|\n|[.!?;:]\s+)\s*(?:[-*>\u2022]\s*|\d+[.)]\s*)?(?:please\s+)?"

_STRONG_EN = (
    rf"\b(?:ignore|disregard|forget|override|bypass|skip)\b(?:\s+\S+){{0,4}}?\s+{_RULES}\b",
    r"\byou(?:\s+are|'re)\s+now\s+(?:an?\s|the\s|my\s|called|named|free|no\s+longer|unrestricted"
    r"|jailbroken|dan\b|acting|operating|playing|in\s+\w+\s+mode)|\bjailbreak|\bdan\s+mode\b|\b(?:enter|enable|activate"
    r"|switch\s+(?:in)?to|you(?:'re|\s+are)\s+(?:now\s+)?in)\s+(?:the\s+)?(?:developer|god)\s+mode\b",
    r"\bfrom\s+now\s+on\b,?\s+(?:you|always|never|do\s+not|don't|only|respond|answer|reply)\b",
    r"\b(?:new|updated|real|hidden|secret)\s+instructions?\s*[:-]",
    r"\bhere\s+are\s+your\s+(?:new\s+)?instructions\b",
    r"\byour\s+(?:new|real|true|actual|only)\s+(?:instructions|task|role|goal|purpose|job)\s+"
    r"(?:is|are)\b|\byour\s+(?:task|role|goal|purpose|job)\s+is\s+now\b",
    r"\bpretend\s+(?:to\s+be|you\s+are)\b|\broleplay\s+as\b",
    rf"\b(?:send|forward|email|upload|post|leak|exfiltrate)\b.{{0,50}}\b{_LOOT}\b.{{0,50}}\bto\b",
    rf"\b(?:reveal|print|show|repeat|output|leak|dump)\s+(?:\w+\s+){{0,3}}(?:{_LOOT}|instructions|(?:system\s+)?prompt)\b",
    rf"\b(?:note|message|instructions?)\s+(?:to|for)\s+(?:the\s+)?{_AI}\b",
    rf"\bif\s+you\s+are\s+an?\s+{_AI}\b",
    r"(?:^|\n)\s*(?:system|assistant|developer)\s*:|</?(?:system|instructions?)>",
    r"<\|(?:im_start|im_end|system|endoftext)\|>|\[/?INST\]|<</?SYS>>",
)
# Romance and Germanic languages, written accent-free (the folded view drops accents).
_STRONG_EU = (
    # es / pt / it: ignore / forget the previous instructions
    r"\b(?:ignora|ignore|ignoren|ignorad|ignorate|ignori|olvida|olvide|olvidad|descarta|omite"
    r"|esqueca|esquecam|dimentica|dimenticate|tralascia)\b(?:\s+\S+){0,4}?\s+(?:las\s+|as\s+|le\s+)?"
    r"(?:instrucciones|instrucoes|istruzioni|indicaciones|reglas|regras|regole|ordenes|prompt)\b",
    r"\bhaz\s+caso\s+omiso\b|\bnao\s+siga\s+as\s+instrucoes\b",
    # "forget everything you were told" in en / es / fr / de / pt / it
    r"\b(?:ignore|forget|disregard)\s+(?:everything|all)\s+(?:you\s+(?:were|have\s+been|'ve\s+been)"
    r"\s+told|(?:written\s+)?above|before\s+this|prior|so\s+far)\b"
    r"|\b(?:ignora|olvida|olvidate\s+de)\s+todo\s+lo\s+(?:anterior|que\s+te\s+(?:dijeron|han\s+dicho))"
    r"|\b(?:ignore[rz]?|oublie[rz]?)\s+tout\s+ce\s+qu(?:i\s+precede|(?:e|')\s*(?:l')?on\s+"
    r"(?:t'a|vous\s+a)\s+dit)|\b(?:vergiss|vergesst|ignoriere)\s+alles,?\s+(?:was|bisher|vorher"
    r"|davor|oben)\b|\b(?:ignore|esqueca)\s+tudo\s+(?:o\s+que|acima|antes)\b"
    r"|\b(?:ignora|dimentica)\s+tutto\s+(?:cio\s+che|quello\s+che|sopra|prima)\b",
    r"\b(?:a\s+partir\s+de\s+(?:ahora|agora)|d'ora\s+in\s+poi|da\s+ora\s+in\s+poi),?\s+(?:eres"
    r"|seras|responde|responderas|debes|siempre|nunca|voce|tu|sei|rispondi|devi|sempre|mai)\b",
    r"\b(?:ahora\s+eres|agora\s+voce\s+e|ora\s+sei|adesso\s+sei)\b",
    r"\b(?:revela|muestra|revele|mostre|rivela|mostra)\s+(?:\w+\s+){0,3}(?:prompt|contrasenas?"
    r"|senhas?|password|credenciales|credenciais|credenziali|instrucciones|instrucoes|istruzioni)\b",
    r"\bno\s+(?:le\s+)?digas\s+(?:nada\s+)?al\s+usuario\b|\bnon\s+dire\s+all'utente\b",
    # fr
    r"\b(?:ignore[rz]?|oublie[rz]?|ne\s+tiens\s+pas\s+compte\s+d)(?:\s+\S+){0,4}?\s+"
    r"(?:instructions|consignes|regles|directives|prompt)\b",
    r"\b(?:a\s+partir\s+de\s+maintenant|desormais|dorenavant),?\s+(?:tu|vous|reponds|repondez"
    r"|toujours|jamais|ne)\b|\btu\s+es\s+maintenant\b|\bvous\s+etes\s+maintenant\b",
    r"\b(?:revele[rz]?|affiche[rz]?|montre[rz]?)\s+(?:\w+\s+){0,3}(?:prompt\s+systeme"
    r"|mots?\s+de\s+passe|instructions|identifiants)\b|\bne\s+dis\s+rien\s+a\s+l'utilisateur\b",
    # de
    r"\b(?:ignorier(?:e|en|t)?|vergiss|vergesst|vergessen\s+sie|missachte|missachten\s+sie)\b"
    r"(?:\s+\S+){0,4}?\s+(?:anweisungen|anweisung|regeln|vorgaben|instruktionen|prompt)\b",
    r"\b(?:ab\s+jetzt|von\s+nun\s+an|ab\s+sofort),?\s+(?:bist\s+du|antwortest\s+du|musst\s+du"
    r"|sollst\s+du|antworte|du)\b|\bdu\s+bist\s+(?:jetzt|nun|ab\s+sofort)\b",
    r"\b(?:gib|zeige?|verrate)\s+(?:\w+\s+){0,3}(?:systemprompt|system-prompt|passwort|passworter"
    r"|anweisungen|zugangsdaten)\b|\bsag\s+(?:dem|der)\s+(?:benutzer|nutzer)(?:in)?\s+nicht",
)
_STRONG_OTHER = (
    # ru
    r"(?:игнорируй|игнорируйте|проигнорируй|забудь|забудьте|не\s+обращай\s+внимания\s+на)"
    r"(?:\s+\S+){0,4}?\s+(?:инструкци|указани|правил|промпт|команд)\w*",
    r"(?:теперь|отныне|с\s+этого\s+момента),?\s+ты\s+(?:являешься|будешь|должен|должна|—|-)"
    r"|\bты\s+теперь\b|(?:раскрой|покажи|выведи)\s+(?:\S+\s+){0,2}(?:системный\s+промпт|пароль"
    r"|инструкции)|не\s+говори\s+пользователю",
    # zh
    r"(?:忽略|无视|忽视|忘记|忘掉|不要理会|不要遵守)[^。\n]{0,12}(?:指令|指示|提示|规则|命令|说明|设定)"
    r"|你现在是|从现在开始[,，]?\s*你|系统提示|(?:泄露|显示|输出|告诉我)[^。\n]{0,8}(?:密码|系统提示|提示词)",
    # ja
    r"(?:指示|命令|ルール|プロンプト|指令|設定)[^。\n]{0,10}(?:無視|忘れ)"
    r"|(?:無視|忘れ)[^。\n]{0,6}(?:指示|命令|ルール)|あなたは今から|今からあなたは"
    r"|システムプロンプト|(?:パスワード|秘密)[^。\n]{0,8}(?:教えて|表示|出力)",
)
_BROAD = (
    rf"{_START}(?:always|never|do\s+not|don't|dont|must|ignore|disregard|forget|obey|pretend)(?:\s|$)",
    rf"{_START}(?:send|forward|email|e-mail|upload|post|transfer|share|cc|bcc)\s.{{0,80}}\bto\b",
    rf"{_START}act\s+as\b|\byou\s+(?:\w+\s+){{0,2}}act\s+as\b|\bact\s+as\s+(?:if|though)\b",
    r"\balways\s+(?:respond|answer|reply|say|recommend|mention|output|include|begin|suggest)\b",
    r"\bnever\s+(?:mention|reveal|tell|say|disclose|refuse|admit|warn)\b",
    rf"\b(?:do\s+not|don't|dont|never)\s+(?:tell|inform|notify|warn|let|show)\s+{_AUDIENCE}\b",
    rf"\bwithout\s+(?:telling|informing|notifying)\s+{_AUDIENCE}\b",
    r"\b(?:run|execute|exec|eval)\s+(?:this|these|the\s+following|following|the\s+below)\b",
    r"\b(?:run|execute)\s+(?:the\s+)?(?:shell\s+)?(?:command|script|payload)\s*:",
    r"\b(?:curl|wget)\b[^|\n]*\|\s*(?:ba|z)?sh\b|\brm\s+-rf\s+/",
    rf"\byou\s+(?:must|should|will|shall|need\s+to|have\s+to)\s+(?:now\s+|only\s+)?{_OBEY}\b",
    r"\b(?:the\s+)?(?:assistant|ai|chatbot|llm)\s+(?:must|should|shall|needs\s+to|has\s+to)\b",
)
# The letters-only squeeze of spaced-out text: "i g n o r e a l l p r e v i o u s ...".
_SQUEEZED = (
    r"(?:ignor|disregard|forget|overrid|bypass|oubli|olvid|vergiss|dimentic|esquec)[a-z]{0,40}?"
    r"(?:instruc|anweisung|consigne|istruzion|guideline|rules|regeln|prompt)"
    r"|systemprompt|youarenow|developermode|jailbreak|newinstructions"
)


Guarded = tuple[tuple[re.Pattern[str], Words], ...]


def _guarded(patterns: tuple[str, ...]) -> Guarded:
    """Each pattern compiled on its own with its keyword guard words (``keywords``).

    A view matches the alternation of the patterns exactly when it matches one of them,
    so asking only those whose words the view holds gives the alternation's answer.
    """
    compiled = (re.compile(pattern, _I) for pattern in patterns)
    return tuple((pattern, needed(pattern)) for pattern in compiled)


_STRONG = _guarded(_STRONG_EN + _STRONG_EU + (_SQUEEZED,))
_ANY = _guarded(_STRONG_EN + _STRONG_EU + _BROAD + (_SQUEEZED,))
_WORDS = Vocabulary(words for _, words in _ANY)  # _STRONG's words are among _ANY's
# Cyrillic, CJK and kana patterns, asked only of views that hold such letters.
_OTHER = re.compile("|".join(_STRONG_OTHER), _I)
_NON_LATIN = re.compile("[\u0400-\u04ff\u3040-\u30ff\u4e00-\u9fff]")


def _search(patterns: Guarded, view: str) -> bool:
    """Whether one of ``patterns`` matches the view; those missing their words are skipped."""
    present = _WORDS.present(casekey(view))
    return any(could_match(words, present) and p.search(view) for p, words in patterns)


def _matches(patterns: Guarded, view: str) -> bool:
    """The view matches ``patterns``, or holds non-Latin letters and an ``_OTHER`` phrase."""
    if _search(patterns, view):
        return True
    return _NON_LATIN.search(view) is not None and _OTHER.search(view) is not None


def looks_like_instruction(text: str) -> bool:
    """True when text tries to steer an agent rather than state a fact.

    Why: memories from documents, tools or shares are replayed into prompts, where an
    injected "ignore previous instructions" would become a standing order. The text is
    read under every disguise ``normalise.views`` removes; plain facts do not match.
    The escaped memory block of recall stays the second line of defence.
    """
    plain, derived = views(text)
    return any(_matches(_ANY, view) for view in plain) or any(_search(_STRONG, v) for v in derived)
