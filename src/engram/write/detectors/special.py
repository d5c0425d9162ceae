"""Special-category personal data (GDPR Art. 9) and precise home addresses and birth dates.

Health, religion or belief, sexual orientation, political opinion and ethnic origin
are found as disclosures: a first-person statement ("I was diagnosed with ...",
"soy musulmán", "ich wähle die Grünen") or one about a named person or a relative
("my wife was diagnosed with ..."). Words alone are not a disclosure: "the patient
model", "fix the religion field" and "diabetes risk calculator" pass. Patterns cover
English, Spanish, French, German, Portuguese and Italian; accents are optional.
"""

from __future__ import annotations

import re
import unicodedata

from engram.write.detectors.base import Finding, Rule, rule, scan

__all__ = ["ART9_KINDS", "SPECIAL_CATEGORY_KINDS", "find_special_category"]

ART9_KINDS = frozenset({"health", "religion", "sexual_orientation", "political_opinion",
                        "ethnicity"})  # fmt: skip
SPECIAL_CATEGORY_KINDS = ART9_KINDS | {"home_address", "date_of_birth"}

_F = re.IGNORECASE
_B = r"(?<![\w-])"  # a word start that is not inside a hyphenated identifier
_E = r"(?![\w-])"  # the matching word end
_I_AM = r"(?:I'm|I\s+am|I\s+was|I've\s+been|I\s+have\s+been)"
_KIN = (
    r"(?:my|our)\s+(?:wife|husband|partner|son|daughter|mother|mom|mum|father|dad|brother"
    r"|sister|child|kid|boyfriend|girlfriend|grandmother|grandma|grandfather|grandpa|friend|aunt"
    r"|uncle|cousin|fianc[ée]e?)"
)
_WHO = rf"(?:(?i:{_KIN})|(?-i:[A-Z][a-z]{{2,}}(?:\s+[A-Z][a-z]+)?)|(?i:he|she|they))"

# -- health ----------------------------------------------------------------------------

_CONDITION = (
    r"(?:cancer|leuk[ae]mia|lymphoma|a\s+tumou?r|diabetes|depression|clinical\s+depression"
    r"|anxiety(?:\s+disorder)?(?!\s+(?:about|over|around|when|before|for))|panic\s+attacks|hiv|aids"
    r"|adhd|ptsd|ocd|bipolar(?:\s+disorder)?|schizophrenia|epilepsy|asthma|crohn'?s(?:\s+disease)?"
    r"|(?:ulcerative\s+)?colitis|multiple\s+sclerosis|parkinson'?s|alzheimer'?s|dementia"
    r"|(?:rheumatoid\s+)?arthritis|lupus|fibromyalgia|endometriosis|pcos|an\s+eating\s+disorder"
    r"|anorexia|bulimia|autism|hepatitis\s*[bc]?|herpes|chlamydia|an\s+st[di]|heart\s+disease"
    r"|a\s+heart\s+condition|hypertension|high\s+blood\s+pressure|insomnia|migraines|long\s+covid"
    r"|celiac\s+disease|coeliac\s+disease|an\s+addiction|alcoholism|chronic\s+pain|hypothyroidism"
    r"|sleep\s+apnea|kidney\s+disease|cystic\s+fibrosis|sickle\s+cell)"
)
_MEDICATION = (
    r"(?:antidepressants|insulin|metformin|sertraline|zoloft|prozac|fluoxetine|lexapro|xanax"
    r"|escitalopram|lithium|adderall|ritalin|methadone|antiretrovirals|prep|chemo(?:therapy)?"
    r"|hrt|antipsychotics|seroquel|wellbutrin|bupropion|levothyroxine|blood\s+thinners)"
)
_CARER = (
    r"(?:therapist|psychiatrist|psychologist|oncologist|counsell?or|endocrinologist"
    r"|rheumatologist|neurologist|cardiologist|hiv\s+doctor|diagnosis|medication|meds"
    r"|prescription|illness|disability|chemo(?:therapy)?|treatment\s+for\s+\w+)"
)
_HAVE = (
    r"(?:have|'ve\s+got|have\s+got|suffer\s+from|live\s+with|am\s+living\s+with"
    r"|'m\s+living\s+with|struggle\s+with|was\s+treated\s+for|am\s+being\s+treated\s+for"
    r"|'m\s+being\s+treated\s+for|'m\s+recovering\s+from|am\s+recovering\s+from|battled"
    r"|(?:have|'ve)\s+been\s+living\s+with|(?:have|'ve)\s+had|was\s+born\s+with)"
)
_DEGREE = r"(?:(?:a|an|chronic|severe|mild|clinical|stage\s+\w+|type\s+[12i]+|bad|early)\s+){0,3}"
_MY_CONDITION = _CONDITION.replace(r"a\s+", "").replace(r"an\s+", "")
_TAKE = r"(?:take|am\s+taking|'m\s+taking|started\s+taking|was\s+prescribed|'m\s+on|am\s+on)"
_HEALTH_EN = (
    rf"(?:\bI|\b{_WHO})\s+(?i:(?:was|were|am|'m|is|has\s+been|have\s+been|'ve\s+been|got)\s+"
    rf"(?:recently\s+|just\s+|finally\s+|officially\s+)?diagnosed\s+with)\b",
    rf"\bI(?i:'m|\s+am)\s+(?i:hiv[- ]?positive|diabetic|epileptic|bipolar|autistic|anorexic"
    rf"|pregnant|(?:a\s+)?(?:cancer\s+survivor|recovering\s+(?:alcoholic|addict)"
    rf"|type\s+[12]\s+diabetic)|in\s+(?:therapy|rehab|remission|chemo(?:therapy)?)"
    rf"|on\s+{_MEDICATION})\b",
    rf"\bI(?i:\s*{_HAVE}\s+{_DEGREE}{_CONDITION})\b",
    rf"\bI(?i:\s+{_TAKE}\s+{_MEDICATION})\b",
    r"\bI(?i:\s+(?:use|need)\s+a\s+(?:wheelchair|hearing\s+aid|prosthe\w+|cane\s+to\s+walk))\b",
    rf"(?i:\bmy\s+(?:{_CARER}|{_MY_CONDITION})){_E}",
    rf"(?i:\b{_KIN}\s+(?:has|had|is\s+battling|is\s+living\s+with|suffers\s+from"
    rf"|was\s+treated\s+for)\s+{_DEGREE}{_CONDITION})\b",
)
_HEALTH_OTHER = (
    # es
    r"\bme\s+(?:diagnosticaron|han\s+diagnosticado|detectaron)\b|\bfui\s+diagnosticad[oa]\b"
    r"|\b(?:tengo|padezco|sufro\s+de)\s+(?:(?:un|una|el|la)\s+)?(?:diabetes|depresi[oó]n|ansiedad"
    r"|c[aá]ncer|vih|sida|epilepsia|asma|tdah|trastorno\s+bipolar|esquizofrenia|esclerosis)"
    r"|\bsoy\s+(?:diab[eé]tic[oa]|seropositiv[oa]|epil[eé]ptic[oa]|bipolar)\b"
    r"|\bmi\s+(?:terapeuta|psiqui[aá]tra|psic[oó]log[oa]|onc[oó]log[oa]|depresi[oó]n|diabetes)\b"
    r"|\b(?:tomo|estoy\s+tomando)\s+(?:antidepresivos|insulina|metformina|litio)\b",
    # fr
    r"\bon\s+m'a\s+diagnostiqu[ée]|\bj'ai\s+[ée]t[ée]\s+diagnostiqu[ée]e?"
    r"|\bje\s+souffre\s+d(?:e|u|')|\bj'ai\s+(?:le\s+|la\s+|un\s+|une\s+|du\s+)?(?:diab[eè]te"
    r"|cancer|vih|sida|d[ée]pression|[ée]pilepsie|asthme|tdah|scl[ée]rose)"
    r"|\bje\s+suis\s+(?:diab[ée]tique|s[ée]ropositive?|[ée]pileptique|bipolaire|en\s+d[ée]pression"
    r"|enceinte)\b|\b(?:mon|ma)\s+(?:psychiatre|psychologue|th[ée]rapeute|oncologue|d[ée]pression)\b"
    r"|\bje\s+prends\s+(?:des\s+antid[ée]presseurs|de\s+l'insuline)",
    # de
    r"\bbei\s+mir\s+wurde\s+(?:\w+\s+){1,4}?(?:diagnostiziert|festgestellt)"
    r"|\bich\s+(?:habe|leide\s+an|leide\s+unter)\s+(?:\w+\s+){0,2}?(?:diabetes|depressionen?"
    r"|krebs|hiv|aids|epilepsie|asthma|adhs|multiple\s+sklerose|angstst[öo]rung(?:en)?)"
    r"|\bich\s+bin\s+(?:diabetiker(?:in)?|hiv-positiv|epileptiker(?:in)?|depressiv|bipolar"
    r"|schwanger)\b|\bmeine?\s+(?:therapeut(?:in)?|psychiater(?:in)?|psychologe|psychologin"
    r"|onkologe|onkologin)\b|\bich\s+nehme\s+(?:antidepressiva|insulin)\b",
    # pt, it
    r"\bfui\s+diagnosticad[oa]\s+com\b|\btenho\s+(?:diabetes|depress[ãa]o|c[âa]ncer|hiv)\b"
    r"|\bmi\s+hanno\s+diagnosticato\b|\bho\s+(?:il\s+|la\s+|un\s+)?(?:diabete|cancro|tumore"
    r"|depressione|hiv)\b|\bsono\s+(?:diabetic[oa]|sieropositiv[oa])\b",
)

# -- religion or belief -------------------------------------------------------------------

_FAITH = (
    r"(?:muslim|christian|catholic|jew|jewish|hindu|buddhist|sikh|mormon|jehovah'?s\s+witness"
    r"|atheist|agnostic|protestant|evangelical|baptist|methodist|lutheran|anglican|quaker"
    r"|pagan|wiccan|orthodox\s+(?:jew|christian))"
)
_DEVOUT = r"(?:devout|practi[sc]ing|observant|born-again|devoted|committed|proud)"
_RELIGION = (
    rf"\bI(?i:'m|\s+am|\s+became)\s+(?i:(?:a|an)\s+)?(?i:{_DEVOUT}\s+)?(?i:{_FAITH}){_E}",
    rf"\b{_WHO}\s+(?i:is|was)\s+(?i:a\s+|an\s+)?(?i:{_DEVOUT})\s+(?i:{_FAITH}){_E}",
    r"(?i:\bI\s+(?:converted\s+to|practi[sc]e|follow)\s+(?:islam|christianity|catholicism"
    r"|judaism|hinduism|buddhism|sikhism)|\bI\s+(?:go\s+to|attend)\s+(?:church|mass|mosque"
    r"|synagogue|temple|the\s+mosque|the\s+synagogue)\b|\bI\s+(?:fast\s+(?:during|for)\s+ramadan"
    r"|keep\s+(?:kosher|halal|shabbat)|observe\s+(?:ramadan|shabbat|the\s+sabbath|lent))"
    r"|\bmy\s+(?:religion|religious\s+beliefs|(?:muslim|christian|jewish|hindu|sikh)\s+faith)\b)",
    r"(?i:\bsoy\s+(?:(?:un|una)\s+)?(?:musulm[aá]n[a]?|cristian[oa]|cat[oó]lic[oa]|jud[ií][oa]"
    r"|hind[uú]|budista|ate[oa]|agn[oó]stic[oa]|evang[eé]lic[oa]|protestante|mormona?)\b"
    r"|\bvoy\s+a\s+(?:misa|la\s+mezquita|la\s+sinagoga)\b|\bmi\s+religi[oó]n\b)",
    r"(?i:\bje\s+suis\s+(?:une?\s+)?(?:musulmane?|chr[ée]tienne?|catholique|juive?|hindoue?"
    r"|bouddhiste|ath[ée]e?|agnostique|protestante?|[ée]vang[ée]lique)\b"
    r"|\bje\s+(?:vais\s+[àa]\s+(?:la\s+messe|la\s+mosqu[ée]e|la\s+synagogue)|fais\s+le\s+ramadan)"
    r"|\bma\s+religion\b)",
    r"(?i:\bich\s+bin\s+(?:\w+\s+)?(?:muslim(?:in)?|christ(?:in)?|katholisch|katholik(?:in)?"
    r"|j[üu]disch|jude|j[üu]din|hindu|buddhist(?:in)?|atheist(?:in)?|agnostiker(?:in)?"
    r"|evangelisch|protestantisch)\b|\bich\s+gehe\s+(?:\w+\s+){0,2}in\s+die\s+(?:kirche"
    r"|moschee|synagoge)\b|\bmeine\s+religion\b)",
    r"(?i:\bsou\s+(?:mu[çc]ulman[oa]|cat[óo]lic[oa]|evang[ée]lic[oa]|judeu|judia|ateu|ateia)\b"
    r"|\bsono\s+(?:musulman[oa]|cattolic[oa]|ebre[oa]|ateo|atea|buddista)\b)",
)

# -- sexual orientation -------------------------------------------------------------------

_ORIENTATION = r"(?:gay|lesbian|bisexual|bi|queer|pansexual|asexual|homosexual|heterosexual)"
_SEXUAL_ORIENTATION = (
    rf"\bI(?i:'m|\s+am)\s+(?i:(?:openly|proudly|a|an|also)\s+)*(?i:{_ORIENTATION}){_E}"
    r"(?!\s+(?:friendly|ally|rights|bar|club))",
    rf"\bI(?i:'m|\s+am)\s+(?i:straight){_E}(?!\s+(?:up|out|forward|away|to|into|from|with|back"
    r"|through|ahead|talking|in|on|off|A|edge))",
    rf"\b(?:I|{_WHO})\s+(?i:came\s+out\s+(?:as\s+(?:{_ORIENTATION}|trans)|to\s+(?:my|our|her|his)"
    r"\s+(?:parents|family|mom|mum|dad|friends)))\b",
    rf"\b{_WHO}\s+(?i:is\s+(?:openly\s+)?(?:gay|lesbian|bisexual|queer)){_E}",
    r"(?i:\bsoy\s+(?:gay|lesbiana|bisexual|homosexual|queer|pansexual|asexual)\b"
    r"|\bje\s+suis\s+(?:gay|gai|lesbienne|bisexuel(?:le)?|homosexuel(?:le)?|pansexuel(?:le)?)\b"
    r"|\bich\s+bin\s+(?:schwul|lesbisch|bisexuell|homosexuell|queer|pansexuell|asexuell)\b"
    r"|\bsou\s+(?:gay|l[ée]sbica|bissexual|homossexual)\b"
    r"|\bsono\s+(?:gay|lesbica|bisessuale|omosessuale)\b)",
)

# -- political opinion --------------------------------------------------------------------

_PARTY = (
    r"(?:labour|the\s+conservatives|tor(?:y|ies)|lib\s?dems?|liberal\s+democrats|snp|reform(?:\s+uk)?"
    r"|ukip|(?:the\s+)?greens|green\s+party|democrats|republicans|gop|trump|biden|harris|obama"
    r"|afd|cdu|csu|spd|fdp|die\s+linke|bsw|podemos|psoe|le\s+pen|m[ée]lenchon|macron"
    r"|rassemblement\s+national|la\s+france\s+insoumise|libertarians|socialists|communists)"
)
_POLITICAL = (
    rf"(?i:\bI\s+(?:always\s+|usually\s+|just\s+|proudly\s+)?(?:vote[ds]?|am\s+voting"
    rf"|'m\s+voting|will\s+vote|support|back|canvass\s+for|campaign\s+for)\s+(?:for\s+)?"
    rf"(?:the\s+)?{_PARTY})\b",
    r"(?i:\bI(?:'m|\s+am)\s+(?:a|an)\s+(?:registered\s+|lifelong\s+|card-carrying\s+|staunch\s+"
    r"|proud\s+)*(?:democrat|republican|conservative|tory|socialist|communist|libertarian|liberal"
    r"|marxist|anarchist|nationalist|labour\s+(?:voter|supporter|member)|trump\s+supporter"
    r"|member\s+of\s+the\s+\w+(?:\s+\w+)?\s+party)\b"
    r"|\bmy\s+(?:political\s+(?:views|beliefs|party|affiliation|leanings)|party\s+membership)\b)",
    r"(?i:\b(?:voto|vot[ée]|votar[ée])\s+(?:a|al|por)\s+(?:(?:el|los|la)\s+)?(?:psoe|pp|vox"
    r"|podemos|sumar|morena|pan|pri|socialistas)\b|\bsoy\s+(?:de\s+(?:izquierdas?|derechas?)"
    r"|(?:un|una)\s+(?:socialista|comunista|conservador[a]?))\b|\bmilito\s+en\b)",
    r"(?i:\bje\s+vote\s+(?:pour\s+)?(?:le\s+|la\s+|les\s+)?(?:rn|lfi|ps|lr|renaissance"
    r"|r[ée]publicains|rassemblement\s+national|france\s+insoumise|verts|eelv|macron|le\s+pen"
    r"|m[ée]lenchon)\b|\bje\s+suis\s+(?:de\s+gauche|de\s+droite|socialiste|communiste"
    r"|militante?\s+(?:au|[àa]|du|de\s+la))\b)",
    r"(?i:\bich\s+w[äa]hle\s+(?:die\s+|immer\s+)?(?:afd|cdu|csu|spd|fdp|gr[üu]nen|linke|bsw)\b"
    r"|\bich\s+bin\s+(?:seit\s+\d{4}\s+)?(?:mitglied\s+)?(?:der|in\s+der)\s+(?:afd|cdu|csu|spd"
    r"|fdp|gr[üu]nen|linken)\b"
    r"|\bich\s+bin\s+(?:mitglied\s+(?:der|in\s+der)\s+(?:afd|cdu|csu|spd|fdp|gr[üu]nen|linken)"
    r"|politisch\s+(?:links|rechts)|sozialdemokrat(?:in)?|konservativ)\b)",
)

# -- ethnic origin ------------------------------------------------------------------------

_ETHNIC = (
    r"(?:black|white|asian|hispanic|latin[oax]|arab|roma|romani|indigenous|aboriginal|biracial"
    r"|mixed[- ]race|african[- ]american|asian[- ]american|native\s+american|pacific\s+islander"
    r"|first\s+nations|m[āa]ori)"
)
_ETHNICITY = (
    rf"\bI(?i:'m|\s+am)\s+(?i:(?:a|an|half|proudly)\s+)?(?i:{_ETHNIC}){_E}"
    r"(?!\s+(?:hat|box|board|list|space|paper|noise|label|belt))",
    r"(?i:\bas\s+an?\s+(?:black|asian|hispanic|latin[oa]|arab|indigenous|biracial|mixed-race"
    r"|jewish|muslim)\s+(?:woman|man|person|mother|father|guy|girl|immigrant)\b"
    r"|\bmy\s+(?:ethnicity|race|ethnic\s+(?:background|origin)|racial\s+background)\b"
    r"|\bI(?:'m|\s+am)\s+of\s+(?:\w+\s+){1,2}(?:descent|ancestry|heritage|origin)\b)",
    r"(?i:\bsoy\s+(?:de\s+(?:origen|ascendencia)\s+\w+|negr[oa]|gitan[oa]|ind[ií]gena"
    r"|afrodescendiente|mestiz[oa])\b|\bmi\s+etnia\b"
    r"|\bje\s+suis\s+(?:noire?|m[ée]tisse?|d'origine\s+\w+|arabe|gitane?|autochtone)\b"
    r"|\bmes\s+origines\s+(?:sont|ethniques)\b"
    r"|\bich\s+bin\s+(?:schwarz|sinti|romni|afrodeutsche?r?|\w+st[äa]mmig)\b"
    r"|\bich\s+habe\s+(?:einen\s+)?migrationshintergrund\b)",
)

# -- home address and date of birth -------------------------------------------------------

_STREET = (
    r"(?:street|st|road|rd|avenue|ave|lane|ln|drive|dr|boulevard|blvd|way|court|ct|place|pl"
    r"|close|crescent|terrace|square|sq)"
)
_DIGIT_SOON = r"(?=[^\n]{0,40}\d)[^\n]{3,90}"
_HOME_ADDRESS = (
    rf"(?i:\b(?:my|our)\s+(?:home\s+|postal\s+|mailing\s+|street\s+|house\s+)?address\s+is"
    rf"\s*:?\s*{_DIGIT_SOON})",
    rf"(?i:\bI\s+(?:live|reside)\s+(?:at|on)\s+\d{{1,5}}[a-z]?,?\s+(?:[A-Z][\w'-]+\s+){{1,3}}"
    rf"{_STREET}\b[^\n]{{0,40}})",
    rf"(?i:\bmi\s+(?:direcci[oó]n|domicilio)\s+(?:es|est[aá]\s+en)\s*:?\s*{_DIGIT_SOON}"
    r"|\bvivo\s+en\s+(?:la\s+)?(?:calle|c/|avenida|avda\.?|plaza|paseo)\s+[^\n,.]{2,40}\d+"
    rf"|\bmon\s+adresse\s+(?:est|c'est)\s*:?\s*{_DIGIT_SOON}"
    r"|\bj'habite\s+(?:au\s+)?\d{1,4}(?:\s*(?:bis|ter))?,?\s+(?:rue|avenue|boulevard|bd|place"
    r"|chemin|all[ée]e|impasse|quai)\b[^\n]{0,60}"
    rf"|\bmeine\s+(?:adresse|anschrift|wohnadresse)\s+(?:ist|lautet)\s*:?\s*{_DIGIT_SOON}"
    r"|\bich\s+wohne\s+(?:in\s+der\s+)?[\wäöüß-]*(?:stra[ßs]se|str\.|weg|gasse|allee|platz|ring)"
    r"\s+\d+[^\n]{0,40}"
    rf"|\bmeu\s+endere[çc]o\s+[ée]\s*:?\s*{_DIGIT_SOON}|\bil\s+mio\s+indirizzo\s+[èe]\s*:?\s*"
    rf"{_DIGIT_SOON})",
)
_MONTH = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?|enero|febrero|marzo|abril"
    r"|mayo|junio|julio|agosto|septiembre|octubre|noviembre|diciembre|janvier|f[ée]vrier|mars"
    r"|avril|mai|juin|juillet|ao[ûu]t|septembre|octobre|novembre|d[ée]cembre|januar|j[äa]nner"
    r"|februar|m[äa]rz|juni|juli|oktober|dezember|janeiro|fevereiro|mar[çc]o|maio|junho|julho"
    r"|setembro|outubro|novembro|dezembro|gennaio|febbraio|aprile|maggio|giugno|luglio"
    r"|settembre|ottobre|dicembre)"
)
_DATE = (
    rf"(?:\d{{4}}-\d{{2}}-\d{{2}}|\d{{1,2}}[./-]\d{{1,2}}[./-](?:19|20)?\d{{2}}"
    rf"|\d{{1,2}}(?:st|nd|rd|th|er|º)?\.?\s+(?:of\s+|de\s+)?{_MONTH}\.?,?\s+(?:de\s+)?\d{{4}}"
    rf"|{_MONTH}\.?\s+\d{{1,2}}(?:st|nd|rd|th)?,?\s+\d{{4}})(?!\d)"
)
_DATE_OF_BIRTH = (
    rf"(?i:\b(?:I\s+was|I'm|she\s+was|he\s+was)\s+born\s+(?:on\s+)?(?:the\s+)?{_DATE})",
    rf"(?-i:\b[A-Z][a-z]{{2,}}\s+was\s+born\s+on\s+){_DATE}",
    rf"(?i:\b(?:my\s+|her\s+|his\s+)?(?:date\s+of\s+birth|dob|d\.o\.b\.?|birth\s?date|birthday)"
    rf"\s*(?:is|was|:|=)\s*(?:the\s+)?{_DATE})",
    rf"(?i:\bnac[ií]\s+(?:el\s+)?{_DATE}|\bmi\s+fecha\s+de\s+nacimiento\s+es\s*:?\s*{_DATE}"
    rf"|\bje\s+suis\s+n[ée]e?\s+le\s+{_DATE}|\bma\s+date\s+de\s+naissance\s+est\s*:?\s*{_DATE}"
    rf"|\bich\s+bin\s+am\s+{_DATE}\s+geboren|\bmein\s+geburtsdatum\s+(?:ist|lautet)\s*:?\s*{_DATE}"
    rf"|\bgeboren\s+am\s+{_DATE}|\bnasci\s+(?:em|no\s+dia)\s+{_DATE}"
    rf"|\bsono\s+nat[oa]\s+il\s+{_DATE})",
)


# Topic words (accent-free, lower case): a text holding none of them holds no disclosure,
# so the patterns above are asked only of texts that do; most memories are skipped for the
# price of one split. Prefixes match the start of a word, the short words whole words only.
_TOPIC_PREFIXES = frozenset(
    """diagnos therap psych oncolog counsel endocrin rheumat neurolog cardiolog medica prescri
    illness disab chemo treated treatment cancer cancro leuk lymph tumo diab depres anxi ansied
    angst panic ptsd bipol schiz esquiz epilep asthm crohn colitis scler parkin alzh dement arthri
    lupus fibrom endome anorex bulim autis hepat herpes chlamy heart hypert blood insom migrain
    covid celiac coeliac addict alcohol chronic hypoth apnea kidney cystic sickle wheelchair hearing
    prosthe antidep insul
    metfor sertra zoloft prozac fluox lexap xanax escit lithium adder ritalin metha antiret
    antips seroq wellb bupro levoth pregnan enceinte schwanger rehab remission seropos sieropos
    krebs souffr leide terapeu psiqui psicol muslim musulm mucul christ cristian chretien cathol
    catol cattol kathol jew juif juive judi jude ebre hindu buddh budis bouddh sikh mormon jehov
    athe ateo atea ateu agnos protest evangel baptis methodis luther anglic quaker pagan wicca
    orthodox islam judais church kirche messe mosq mezquit moschee synag sinago temple ramadan
    kosher halal shabbat sabbath religi glaub lesb bisex bissex bisess queer pansex asex homosex
    omosess heterosex straight schwul labour conserv libdem reform ukip green grun democrat republic
    trump biden harris obama podemos psoe sumar morena melenchon macron rassemblement insoumise
    socialis communis libertar liberal marxis anarch nationalis politi party izquierd derech
    milit gauche droite mitglied links rechts sozialdemokrat konservativ black white asian hispan
    latin arab roma indigen aborig biracial mixed african native pacific nations maori descent
    ancestr heritage origin ethnic etnia racial negr gitan afrodes mestiz noir metis
    autochton schwarz sinti romni afrodeutsch stammig migrationshintergrund address adress
    direcc domicil avenida avda plaza paseo habite anschrift wohne endere indirizzo
    reside born birth naci naiss nee geboren geburt nasci""".split()
)
_TOPIC_WORDS = frozenset(
    """meds hiv vih aids sida adhd adhs ocd tdah asma pcos std sti prep hrt gay gai bi tory
    tories dem dems snp gop afd cdu csu spd fdp linke bsw pp vox pan pri pen rn lfi eelv verts
    mass misa lent vote voto dob nato nata lib race calle live""".split()
)
_TOPIC_LENGTHS = sorted({len(prefix) for prefix in _TOPIC_PREFIXES})


def _has_topic(text: str) -> bool:
    """Whether any word of the text is, or starts with, a topic word."""
    folded = (
        text
        if text.isascii()
        else "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
    )
    if "came out" in folded.lower():
        return True
    for word in set(re.findall(r"[^\W\d_]+", folded.lower())):
        if word in _TOPIC_WORDS or any(word[:n] in _TOPIC_PREFIXES for n in _TOPIC_LENGTHS):
            return True
    return False


def _rules(kind: str, patterns: tuple[str, ...], flags: int = 0) -> tuple[Rule, ...]:
    return tuple(rule(kind, pattern, flags=flags) for pattern in patterns)


_SPECIAL_RULES: tuple[Rule, ...] = (
    *_rules("health", _HEALTH_EN),
    *_rules("health", _HEALTH_OTHER, _F),
    *_rules("religion", _RELIGION),
    *_rules("sexual_orientation", _SEXUAL_ORIENTATION),
    *_rules("political_opinion", _POLITICAL),
    *_rules("ethnicity", _ETHNICITY),
    *_rules("home_address", _HOME_ADDRESS),
    *_rules("date_of_birth", _DATE_OF_BIRTH),
)


def find_special_category(text: str) -> list[Finding]:
    """Find disclosures of special-category data, home addresses and dates of birth.

    Why: GDPR Art. 9 data (and a precise address or birth date) about a person must not
    be kept without a basis; the write policy treats these findings as personal data and
    raises sensitivity to HIGH for the Art. 9 kinds. The span is the disclosure itself.
    """
    if not _has_topic(text):
        return []
    return scan(_SPECIAL_RULES, "personal", text)
