"""The words the conversation generator writes with: people, threads of a life, the facts
planted in them, the tools an assistant calls, and the small talk between.

A *thread* is one topic a user comes back to over weeks (a bathroom remodel, a job search). Each
has user lines and assistant sentences that carry no fact (the filler: they mention the thread's
words, so a fact is not the only turn that matches a question), and facts: a statement the user
makes once, a question asked later in the statement's words (`asks`) and one that avoids them
(`rephrased`), and for some an update that replaces the value (`update`).

Slots: `{v}` the fact's value, `{old}` the value an update replaces, and the persona's
`{partner}`, `{kid}`, `{sister}`, `{pet}`, `{city}`, `{item}`; `{n}` a small number.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from random import Random

FIRST = [
    "Dario",
    "Maren",
    "Tobias",
    "Ingrid",
    "Rafael",
    "Noor",
    "Callum",
    "Yusra",
    "Anselm",
    "Priya",
    "Bastien",
    "Leona",
    "Emeka",
    "Sigrid",
    "Mateo",
    "Hana",
    "Oskar",
    "Lucia",
    "Farid",
    "Greta",
    "Tomasz",
    "Amara",
    "Kwame",
    "Elif",
    "Joaquin",
    "Saoirse",
    "Viktor",
    "Mina",
    "Hugo",
    "Talia",
    "Ruben",
    "Zofia",
    "Idris",
    "Marisol",
    "Linus",
    "Chiara",
    "Ayodele",
    "Freya",
    "Nikolai",
    "Imogen",
    "Santiago",
    "Odile",
    "Reza",
    "Beatrix",
    "Kenji",
    "Paloma",
    "Caspar",
    "Ximena",
    "Lorcan",
    "Annika",
    "Desmond",
    "Yara",
    "Florian",
    "Celeste",
]
LAST = [
    "Ruiz",
    "Okafor",
    "Lindqvist",
    "Moreau",
    "Castellano",
    "Haddad",
    "Brennan",
    "Novak",
    "Adeyemi",
    "Takahashi",
    "Varga",
    "Delacroix",
    "Mbeki",
    "Sorensen",
    "Petrakis",
    "Quintero",
    "Hollis",
    "Zielinski",
    "Ferreira",
    "Nakamura",
    "Oyelaran",
    "Bergstrom",
    "Kowalczyk",
    "Achterberg",
    "Mwangi",
    "Lindgren",
    "Esposito",
    "Halloran",
    "Abernathy",
    "Szabo",
    "Fonseca",
    "Whitcombe",
    "Dubois",
    "Carrow",
    "Ivanova",
    "Pemberton",
    "Salazar",
    "Thorne",
    "Kapoor",
    "Vasquez",
    "Engel",
    "Marchetti",
]
CITIES = (
    "Lisbon",
    "Porto",
    "Kyoto",
    "Oaxaca",
    "Tbilisi",
    "Valencia",
    "Montreal",
    "Ljubljana",
    "Hobart",
    "Cartagena",
)
MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
PETS = ("dog", "cat", "rabbit", "greyhound", "beagle", "tabby")
ITEMS = (
    "standing desk",
    "espresso machine",
    "bike trailer",
    "air purifier",
    "bookshelf",
    "rice cooker",
    "monitor arm",
    "hiking boots",
)


def full_name(rng: Random) -> str:
    return f"{rng.choice(FIRST)} {rng.choice(LAST)}"


def date(rng: Random) -> str:
    return f"{rng.choice(MONTHS)} {rng.randint(2, 28)}"


def money(low: int, high: int, step: int = 10) -> Callable[[Random], str]:
    return lambda rng: f"${rng.randrange(low, high, step):,}"


def code(pattern: str) -> Callable[[Random], str]:
    """An identifier: `A` an upper-case letter, `9` a digit, anything else as is."""

    def make(rng: Random) -> str:
        return "".join(
            rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ")
            if char == "A"
            else str(rng.randint(0, 9))
            if char == "9"
            else char
            for char in pattern
        )

    return make


def amount(low: int, high: int, unit: str, *, step: int = 1) -> Callable[[Random], str]:
    return lambda rng: f"{rng.randrange(low, high, step):,} {unit}"


@dataclass(frozen=True)
class Fact:
    """A fact a user states once and asks about much later."""

    key: str
    kind: str  # name | date | number | identifier
    value: Callable[[Random], str]
    says: tuple[str, ...]
    asks: tuple[str, ...]
    rephrased: tuple[str, ...]
    update: tuple[str, ...] = ()


@dataclass(frozen=True)
class Tool:
    """A tool the assistant calls: the user's request, the call, its result, the reply.

    `result` gets the call's arguments and, for a tool that plants a fact, the fact's value
    under "v"; `fact` (if any) is then asked about like a stated one, its evidence the result.
    """

    name: str
    request: tuple[str, ...]
    arguments: Callable[[Random, dict[str, str]], dict[str, object]]
    result: Callable[[Random, dict[str, object], str], dict[str, object]]
    reply: tuple[str, ...]
    fact: Fact | None = None


@dataclass(frozen=True)
class Thread:
    """A topic a user comes back to."""

    name: str
    opener: tuple[str, ...]
    chat: tuple[str, ...]
    replies: tuple[str, ...]
    facts: tuple[Fact, ...]


THREADS: tuple[Thread, ...] = (
    Thread(
        name="renovation",
        opener=(
            "Can we talk about the bathroom remodel again? I keep going back and forth on it.",
            "Bathroom update: the demolition is scheduled, so decisions are getting real now.",
            "I need to think through the remodel budget with you for a few minutes.",
        ),
        chat=(
            "The contractor said the grout needs a full day to dry before anyone showers.",
            "{partner} wants a freestanding tub but I think a walk-in shower is more practical.",
            "We found mould behind the old tiles, which explains the smell.",
            "Do you think heated floors are worth it in a small bathroom?",
            "The contractor keeps sending photos of pipes at odd hours.",
            "I picked up tile samples today and the hallway light makes them all look grey.",
            "How long should a bathroom remodel take if nothing goes wrong?",
            "The vanity we liked is back-ordered for six weeks, of course.",
        ),
        replies=(
            "Remodels almost always find something behind the walls, so a contingency of ten to fifteen percent is sensible.",
            "A walk-in shower is easier to clean and ages well, while a tub helps resale if it is the only one in the house.",
            "Heated floors cost little to run in a small room and most people who have them would not go back.",
            "It is worth asking the contractor for a written schedule with the inspection dates marked.",
            "Tile always looks different at home than in the showroom; daylight is the fairest test.",
            "If the vanity is delayed, the plumber can cap the lines and finish the rest of the room first.",
        ),
        facts=(
            Fact(
                "contractor",
                "name",
                full_name,
                (
                    "We signed with a contractor today: {v}. He seemed the least likely to vanish halfway through.",
                ),
                ("Who's the contractor again?",),
                ("Who did we hire to redo the bathroom, remind me?",),
                (
                    "Bad news, {old} pulled out of the job. {v} is taking over the bathroom from next week.",
                ),
            ),
            Fact(
                "quote",
                "number",
                money(4200, 19800),
                ("The final quote for the bathroom came in at {v}, labour included.",),
                ("What was the bathroom quote in the end?",),
                ("What are we paying in total to get the washroom redone?",),
            ),
            Fact(
                "tile",
                "identifier",
                code("SW-9999"),
                ("For the record, the tile colour we settled on is {v}, the warm white one.",),
                ("What was the tile code?",),
                ("What was that warm white we picked for the walls called?",),
            ),
            Fact(
                "permit",
                "identifier",
                code("BP-99-9999"),
                ("The city issued the building permit, number {v}, so the inspector can come.",),
                ("Do you have the permit number?",),
                ("The inspector wants the reference from the city paperwork, what was it?",),
            ),
            Fact(
                "demolition",
                "date",
                date,
                ("Demolition starts on {v}, so we'll be showering at the gym for a while.",),
                ("When is demolition?",),
                ("On which day do they begin tearing out the old bathroom?",),
                ("The crew is running late, so tearing out moves from {old} to {v}.",),
            ),
        ),
    ),
    Thread(
        name="travel",
        opener=(
            "Let's plan the {city} trip a bit more, I have an hour before bed.",
            "I've been reading about {city} all evening and I'm excited.",
            "Travel question about {city}, if you have a minute.",
        ),
        chat=(
            "Is it better to get a transit pass in {city} or just walk everywhere?",
            "{partner} wants to see every museum and I want to sit in cafés, we need a compromise.",
            "I hate packing, I always bring three sweaters I never wear.",
            "How early should we get to the airport for an international flight these days?",
            "Do you think one carry-on each is enough for ten days?",
            "The guidebook says the old town is hilly, so comfortable shoes it is.",
            "I want at least one day with no plans at all on this trip.",
            "What's a polite amount to tip at restaurants in {city}?",
        ),
        replies=(
            "For ten days, one carry-on works if you plan to do laundry once halfway through.",
            "A day pass pays off if you ride three times, otherwise walking and the odd taxi is cheaper.",
            "Alternating a museum morning with a slow afternoon keeps both of you happy.",
            "Two hours before an international departure is still the safe rule, three in holiday season.",
            "Hilly old towns are lovely but slow; plan fewer sights per day than you think.",
            "A free day in the middle of a trip is often the one people remember best.",
        ),
        facts=(
            Fact(
                "flight",
                "identifier",
                code("AA 9999"),
                ("Booked! Our outbound flight is {v}, leaving early in the morning.",),
                ("What's the flight number for the way out?",),
                ("Which plane are we catching on the way there, what's its code?",),
            ),
            Fact(
                "hotel",
                "name",
                lambda rng: f"Hotel {rng.choice(LAST)}",
                ("We're staying at {v}, close to the river with a rooftop bar.",),
                ("What's the hotel called?",),
                ("Where did we book to sleep on the trip?",),
                ("The first place cancelled on us, so instead of {old} we're now at {v}.",),
            ),
            Fact(
                "departure",
                "date",
                date,
                ("We leave for {city} on {v}, I already asked for the days off.",),
                ("What's the date we go to {city}?",),
                ("What day is our trip starting?",),
            ),
            Fact(
                "booking",
                "identifier",
                code("AAA9AA"),
                ("The apartment booking reference is {v}, they want it at check-in.",),
                ("Do you have the apartment reference?",),
                ("They'll ask for a confirmation code when we arrive, do you have it?",),
            ),
            Fact(
                "travel_budget",
                "number",
                money(1800, 9000, 50),
                ("We agreed to keep the whole trip under {v}, flights included.",),
                ("What's the trip budget?",),
                ("How much were we allowed to spend on the holiday in total?",),
            ),
        ),
    ),
    Thread(
        name="health",
        opener=(
            "My knee is acting up again, can we talk about the rehab plan?",
            "Running update: I did three runs this week.",
            "I want to get more organised about health stuff this year.",
        ),
        chat=(
            "The physio exercises are boring but I can feel the knee getting stronger.",
            "Is it normal to be this sore two days after a long run?",
            "I slept badly again, I think it's the coffee after lunch.",
            "{sister} convinced me to try yoga on Sundays.",
            "How many rest days should I take per week while training?",
            "My watch says my resting heart rate dropped, which is nice to see.",
            "I keep forgetting to stretch after runs.",
            "Should I be worried that the knee clicks when I climb stairs?",
        ),
        replies=(
            "Soreness that peaks around two days after hard effort is normal; sharp or one-sided pain is not.",
            "Two rest days a week is a sensible start while you build distance.",
            "Caffeine has a half-life of about five hours, so an afternoon coffee can still matter at bedtime.",
            "Stretching right after a run is easier to remember if it is part of the cool-down walk.",
            "Clicking without pain or swelling is usually harmless, but mention it at your next appointment.",
            "A lower resting heart rate is a good sign that the training is working.",
        ),
        facts=(
            Fact(
                "physio",
                "name",
                full_name,
                ("My new physiotherapist is {v}, she actually listens, which is a first.",),
                ("What's the physio called?",),
                ("Who's treating my knee these days?",),
            ),
            Fact(
                "dose",
                "number",
                amount(5, 80, "mg", step=5),
                ("The doctor put me on {v} of the anti-inflammatory, once a day with food.",),
                ("What's my anti-inflammatory dose?",),
                ("How much of that medicine am I meant to take each day?",),
                ("The doctor lowered the anti-inflammatory from {old} to {v} today.",),
            ),
            Fact(
                "checkup",
                "date",
                date,
                ("My knee checkup with the specialist is on {v}.",),
                ("When am I seeing the knee specialist?",),
                ("What day am I seeing the orthopaedic doctor?",),
            ),
            Fact(
                "race_goal",
                "number",
                amount(44, 70, "minutes"),
                ("My goal for the 10k in the autumn is {v}, ambitious but possible.",),
                ("What time am I aiming for in the 10k?",),
                ("How fast did I say I want to finish the autumn race?",),
            ),
        ),
    ),
    Thread(
        name="job",
        opener=(
            "Job search check-in, I have news.",
            "I need help thinking through the job thing.",
            "Work stuff again, sorry, it's on my mind constantly.",
        ),
        chat=(
            "I updated my CV but I'm not sure the summary at the top says anything.",
            "How do you answer 'what's your biggest weakness' without sounding rehearsed?",
            "My current manager suspects something, I think.",
            "Should I ask about remote days in the first interview or wait?",
            "I had a recruiter message me about a role that looks like a step down.",
            "Salary negotiation makes me want to hide under the desk.",
            "{partner} thinks I should take the job with the shorter commute.",
            "The take-home assignment took me nine hours, which feels like a lot.",
        ),
        replies=(
            "Asking about remote work in a first interview is normal now; frame it around how you work best.",
            "For weaknesses, name a real one and say what you do about it; that is what interviewers listen for.",
            "In a negotiation, the first number anchors everything, so let them say theirs first if you can.",
            "A commute costs hours every week; it is fair to weigh it like part of the salary.",
            "A CV summary works best as two lines: what you do and what you want to do next.",
            "Take-home work over four hours is worth mentioning politely; good employers listen.",
        ),
        facts=(
            Fact(
                "recruiter",
                "name",
                full_name,
                ("The recruiter handling my application is {v}, very chatty on the phone.",),
                ("What's the recruiter's name?",),
                ("Who was the person from the hiring side I've been talking to?",),
            ),
            Fact(
                "interview",
                "date",
                date,
                ("The final interview is on {v}, in person, four hours of it.",),
                ("What's the date of the final interview?",),
                ("What day is my last round with them?",),
                ("They rescheduled the final interview from {old} to {v}.",),
            ),
            Fact(
                "offer",
                "number",
                money(78000, 160000, 500),
                ("They made an offer: {v} base, plus the usual bonus.",),
                ("What was the salary in the offer?",),
                ("How much would I be earning at the new place before bonus?",),
            ),
            Fact(
                "requisition",
                "identifier",
                code("REQ-99999"),
                ("The job posting ID is {v}, in case I need to reference it.",),
                ("What's the posting ID for the job?",),
                ("HR is asking which opening I applied for, what was its number?",),
            ),
        ),
    ),
    Thread(
        name="car",
        opener=(
            "The car is making that noise again.",
            "Car admin, boring but necessary.",
            "Quick car question before I call the garage.",
        ),
        chat=(
            "There's a rattle from the back left wheel when I go over bumps.",
            "How often should the brake fluid be changed, really?",
            "The dashboard light came on for a second and then went off.",
            "{partner} scraped the bumper in the car park, nothing serious.",
            "Is it worth switching to winter tyres if it hardly snows here?",
            "The garage always finds one more thing when I bring it in.",
            "I need to find the spare key, I think it's in the kitchen drawer.",
            "The car smells a little like burnt sugar after long drives.",
        ),
        replies=(
            "A rattle over bumps is often a worn anti-roll bar link: cheap to fix, worth checking soon.",
            "Brake fluid absorbs water over time; most makers say every two years.",
            "A light that flickers once is worth noting down, with the date and what you were doing.",
            "A sweet smell can mean a coolant leak, so have the level checked before a long trip.",
            "Winter tyres matter below about seven degrees, even without snow.",
            "Ask the garage to show you the worn part; good mechanics are happy to.",
        ),
        facts=(
            Fact(
                "mechanic",
                "name",
                full_name,
                ("The mechanic I trust at the garage is {v}, ask for him if I forget.",),
                ("What's the mechanic's name?",),
                ("Who should I ask for when I take the car in?",),
            ),
            Fact(
                "plate",
                "identifier",
                code("AA99 AAA"),
                ("The new registration came through, the plate is {v}.",),
                ("What's the plate number?",),
                ("What does it say on the front and back of our car now?",),
            ),
            Fact(
                "mileage",
                "number",
                amount(21000, 98000, "miles", step=100),
                ("At the last service the odometer read {v}.",),
                ("What was the mileage at the last service?",),
                ("How far had the car gone when it was last looked at?",),
            ),
            Fact(
                "warranty",
                "date",
                date,
                ("The gearbox warranty runs out on {v}, so anything before that is free.",),
                ("When does the warranty end?",),
                ("Until what day is the transmission still covered?",),
            ),
        ),
    ),
    Thread(
        name="school",
        opener=(
            "School stuff for {kid}, there's always something.",
            "{kid} had a rough week at school.",
            "Parent admin time, sorry.",
        ),
        chat=(
            "{kid} says maths is boring but I think it's the new seating plan.",
            "How much help with homework is too much help?",
            "The school wants volunteers for the bake sale again.",
            "{kid} lost another water bottle, that's three this term.",
            "Should we sign {kid} up for swimming or football this term?",
            "The school newsletter is twelve pages long and says nothing.",
            "{kid} wants a phone, every friend apparently has one.",
            "Reading before bed has gone much better since we moved it earlier.",
        ),
        replies=(
            "Helping is fine as long as {kid} does the thinking; ask questions rather than giving answers.",
            "A seating change can shift a whole subject for a child; it is worth asking the teacher.",
            "Labels with a name and phone number bring back about half of lost bottles.",
            "Let {kid} pick between two activities; the one chosen is the one that sticks.",
            "Many families agree on a phone with limits, kept in the kitchen at night.",
            "Moving reading earlier is a good trick: tired children read less and fight more.",
        ),
        facts=(
            Fact(
                "teacher",
                "name",
                full_name,
                ("{kid}'s new class teacher is {v}, she started after half term.",),
                ("What's {kid}'s teacher called?",),
                ("Who's in charge of {kid}'s classroom since the break?",),
            ),
            Fact(
                "conference",
                "date",
                date,
                ("The parent-teacher conference is on {v} after school.",),
                ("What's the date of the conference at school?",),
                ("What day do we meet the school to hear how {kid} is doing?",),
                ("The school moved the conference from {old} to {v}.",),
            ),
            Fact(
                "locker",
                "identifier",
                code("99-99-99"),
                ("{kid}'s locker combination is {v}, {kid} will forget it by Friday.",),
                ("What's the locker combination?",),
                ("{kid} can't open the thing in the corridor, what were the numbers?",),
            ),
            Fact(
                "trip_cost",
                "number",
                money(35, 640, 5),
                ("The field trip costs {v}, due before the end of the month.",),
                ("What's the price of the field trip?",),
                ("What do we owe the school for the outing?",),
            ),
        ),
    ),
    Thread(
        name="pet",
        opener=(
            "{pet} update, the vet visit went fine.",
            "I'm worried about {pet} a little.",
            "{pet} did something ridiculous today.",
        ),
        chat=(
            "{pet} has started sleeping on the stairs, which is a hazard.",
            "How often should I really be brushing {pet}'s teeth?",
            "{pet} ate half a sock and seems completely unbothered.",
            "We tried a new food and {pet} looked at me like I'd betrayed the family.",
            "Is it normal for {pet} to shed this much in spring?",
            "The neighbours' kids love {pet}, which {pet} tolerates with dignity.",
            "{pet} barks at the postman like he's a burglar every single day.",
            "I think {pet} needs more exercise, the zoomies at 10pm are intense.",
        ),
        replies=(
            "Daily brushing is ideal, but three times a week still makes a real difference.",
            "Spring shedding is normal; a good brush outdoors saves a lot of hoovering.",
            "A sock usually passes, but watch for vomiting or a lack of appetite over the next two days.",
            "Switching food works best over a week, mixing a little more of the new each day.",
            "Late-evening energy often means the day was too quiet; a longer afternoon walk helps.",
            "Barking at the post is a classic; treats when the post arrives can slowly change the habit.",
        ),
        facts=(
            Fact(
                "vet",
                "name",
                lambda rng: f"Dr. {rng.choice(LAST)}",
                ("Our vet is {v} at the clinic on the corner, very patient with {pet}.",),
                ("What's the vet called?",),
                ("Who's the animal doctor we see at the corner clinic?",),
            ),
            Fact(
                "chip",
                "identifier",
                code("985 999 999 999"),
                ("{pet}'s microchip number is {v}, I'm writing it down here so it's somewhere.",),
                ("What's the microchip number?",),
                ("If {pet} gets lost, what's the number the shelter would scan?",),
            ),
            Fact(
                "weight",
                "number",
                lambda rng: f"{rng.randint(3, 38)}.{rng.randint(1, 9)} kg",
                ("At the vet {pet} weighed {v}, a bit more than last time.",),
                ("What was {pet}'s weight?",),
                ("What did the scales say about {pet} at the last check?",),
            ),
            Fact(
                "booster",
                "date",
                date,
                ("{pet}'s booster vaccination is due on {v}.",),
                ("When is the booster due?",),
                ("What day does {pet} need the next round of shots?",),
            ),
        ),
    ),
    Thread(
        name="money",
        opener=(
            "Money admin, my least favourite kind of admin.",
            "Can you help me think about the finances for a bit?",
            "Tax season question.",
        ),
        chat=(
            "I still have receipts in a shoebox from last year.",
            "Should we keep the emergency fund in the normal savings account?",
            "{partner} and I keep forgetting who paid for what.",
            "Is it silly to pay off the car loan early?",
            "I signed up for a budgeting app and abandoned it after a week.",
            "The bank changed its interest rates again.",
            "How much should we be putting aside for {kid}'s education?",
            "I found three subscriptions I'd forgotten about.",
        ),
        replies=(
            "An emergency fund should be boring: easy to reach and not invested.",
            "Paying a loan early is a good return if its rate is above what your savings earn.",
            "A shared spreadsheet with one row per expense ends most who-paid-what debates.",
            "Three forgotten subscriptions is common; a yearly review catches most of them.",
            "A small automatic transfer right after payday works better than any app.",
            "For education savings, starting small and early beats starting big and late.",
        ),
        facts=(
            Fact(
                "accountant",
                "name",
                full_name,
                ("Our accountant this year is {v}, recommended by {sister}.",),
                ("What's the accountant's name?",),
                ("Who's doing our taxes, the person {sister} recommended?",),
            ),
            Fact(
                "refund",
                "number",
                money(140, 5200, 5),
                ("Good news: the tax refund is {v}, arriving in a couple of weeks.",),
                ("How much is the refund?",),
                ("How much are we getting back from the government?",),
            ),
            Fact(
                "policy",
                "identifier",
                code("HP-9999-9999"),
                ("The home insurance policy number is {v}.",),
                ("What's the insurance policy number?",),
                ("If the house floods, what reference do I give the insurer?",),
            ),
            Fact(
                "rate",
                "number",
                lambda rng: (
                    f"{rng.randint(3, 7)}.{rng.choice(('125', '25', '375', '5', '625', '75'))}%"
                ),
                ("The mortgage rate we locked in is {v}, fixed for five years.",),
                ("What's our mortgage rate?",),
                ("What interest are we paying on the house loan?",),
                ("We refinanced: the mortgage went from {old} to {v}.",),
            ),
        ),
    ),
    Thread(
        name="party",
        opener=(
            "Party planning for {sister}'s fortieth, we're behind.",
            "The surprise party, let's go over it again.",
            "{sister}'s birthday party, I need your organised brain.",
        ),
        chat=(
            "How do you keep a surprise party secret when the guest of honour checks everyone's phone?",
            "I want a playlist that works for both teenagers and grandparents.",
            "Should the speeches happen before or after the food?",
            "{partner} volunteered to make a cake, which is brave.",
            "What's a good rain plan for an outdoor party?",
            "I don't know whether to do a seated dinner or a buffet.",
            "Half the guests haven't answered the invitation yet.",
            "Someone suggested a slideshow of old photos, cute or embarrassing?",
        ),
        replies=(
            "Speeches go best after people have eaten but before the dancing starts.",
            "A buffet is more relaxed and copes better with late replies than a seated dinner.",
            "For a mixed playlist, songs from the guest of honour's teens please everyone.",
            "A slideshow is lovely if someone edits out the photos they would veto.",
            "Book a tent or an indoor fallback now; it is cheap to cancel and impossible to find late.",
            "Send a friendly reminder a week before the reply deadline; most people simply forget.",
        ),
        facts=(
            Fact(
                "caterer",
                "name",
                full_name,
                ("The caterer is {v}, she did a wedding we went to and the food was amazing.",),
                ("What's the caterer's name?",),
                ("Who is cooking for {sister}'s celebration?",),
            ),
            Fact(
                "guests",
                "number",
                amount(24, 190, "guests"),
                ("The list is final: {v}, including kids.",),
                ("How many guests are there in the end?",),
                ("How many people are coming to {sister}'s do?",),
                ("More people said yes, so we went from {old} to {v}.",),
            ),
            Fact(
                "deposit",
                "number",
                money(150, 2400, 25),
                ("We paid the venue a deposit of {v}, non-refundable, gulp.",),
                ("What did the deposit come to?",),
                ("What did we already hand over to the hall to hold the date?",),
            ),
            Fact(
                "party_date",
                "date",
                date,
                ("The party is on {v}, a Saturday, the venue confirmed.",),
                ("What's the date of the party?",),
                ("On what day is {sister}'s celebration happening?",),
            ),
        ),
    ),
    Thread(
        name="moving",
        opener=(
            "The move is getting closer and I'm panicking quietly.",
            "Moving logistics, round twelve.",
            "Can we go through the move checklist?",
        ),
        chat=(
            "I've packed four boxes and they're all books.",
            "Should we hire packers or do it ourselves to save money?",
            "{pet} knows something is up, all the boxes are making {pet} nervous.",
            "The new place has a tiny kitchen but a huge garden.",
            "Do I need to tell the post office about the move?",
            "{kid} wants to paint the new bedroom bright orange.",
            "We're getting rid of the old sofa, nobody wants it.",
            "The landlord is being weird about the deposit.",
        ),
        replies=(
            "Books go in small boxes; a large box of books is the one that breaks.",
            "Packers cost more but save days; many people hire them only for the kitchen.",
            "A mail redirect for three months catches most of what you forgot to update.",
            "Keep {pet}'s bed and bowls out until the last day; familiar things help.",
            "Orange can work on one wall; it is a fair compromise with a child.",
            "Photograph the old place on the last day: it settles most deposit disputes.",
        ),
        facts=(
            Fact(
                "movers",
                "name",
                lambda rng: f"{rng.choice(LAST)} Removals",
                ("We booked the movers, {v}, they had the best reviews.",),
                ("Who are the movers?",),
                ("Who's bringing the van and the guys on the big day?",),
            ),
            Fact(
                "move_date",
                "date",
                date,
                ("The move is on {v}, the movers arrive at eight.",),
                ("What's the date of the move?",),
                ("What day do we hand back the keys and go?",),
                ("The movers can't do {old} any more, so the move is now {v}.",),
            ),
            Fact(
                "storage",
                "identifier",
                code("Unit A-999"),
                ("We rented a storage unit for the overflow: {v} at the place by the motorway.",),
                ("What's the storage unit?",),
                ("Where exactly did we put the overflow boxes, which one is ours?",),
            ),
            Fact(
                "wifi",
                "identifier",
                lambda rng: (
                    f"{rng.choice(FIRST).lower()}-{rng.choice(LAST).lower()}-{rng.randint(10, 99)}"
                ),
                ("The wifi password at the new place is {v}, the landlord left it on the fridge.",),
                ("What's the new wifi password?",),
                ("What do I type to get the laptop online in the new flat?",),
            ),
        ),
    ),
)


def _order_result(rng: Random, arguments: dict[str, object], value: str) -> dict[str, object]:
    return {
        "order_id": arguments["order_id"],
        "status": rng.choice(("shipped", "in transit", "out for delivery")),
        "carrier": rng.choice(("UPS", "DHL", "DPD", "FedEx")),
        "tracking_number": value,
        "estimated_delivery": f"in {rng.randint(2, 6)} days",
        "items": [{"name": arguments.get("item", "item"), "quantity": 1}],
        "warehouse": rng.choice(("Leipzig", "Venlo", "Reno", "Swindon")),
        "notes": "Signature required on delivery.",
    }


def _restaurant_result(rng: Random, arguments: dict[str, object], value: str) -> dict[str, object]:
    return {
        "restaurant": f"{rng.choice(('Casa', 'Chez', 'Trattoria', 'Bistro'))} {rng.choice(LAST)}",
        "party_size": arguments["party_size"],
        "time": f"{rng.randint(6, 9)}:{rng.choice(('00', '15', '30', '45'))} pm",
        "confirmation": value,
        "cancellation_policy": "Free cancellation up to 24 hours before.",
        "table": rng.choice(("terrace", "window", "main room")),
    }


def _weather_result(rng: Random, arguments: dict[str, object], value: str) -> dict[str, object]:
    days = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
    start = rng.randrange(7)
    return {
        "city": arguments["city"],
        "forecast": [
            {
                "day": days[(start + offset) % 7],
                "high_c": rng.randint(8, 31),
                "low_c": rng.randint(-2, 17),
                "summary": rng.choice(("sunny", "showers", "cloudy", "windy", "thunderstorms")),
            }
            for offset in range(5)
        ],
        "source": "met-service",
    }


def _calendar_result(rng: Random, arguments: dict[str, object], value: str) -> dict[str, object]:
    events = (
        "dentist",
        "team sync",
        "yoga",
        "call with {sister}",
        "school pickup",
        "haircut",
        "budget review",
        "dinner with friends",
    )
    return {
        "range": arguments["range"],
        "events": [
            {
                "title": rng.choice(events),
                "day": rng.choice(("Mon", "Tue", "Wed", "Thu", "Fri")),
                "time": f"{rng.randint(8, 18)}:{rng.choice(('00', '30'))}",
            }
            for _ in range(rng.randint(3, 6))
        ],
    }


def _search_result(rng: Random, arguments: dict[str, object], value: str) -> dict[str, object]:
    return {
        "query": arguments["query"],
        "results": [
            {
                "title": f"{rng.choice(('A guide to', 'Ten tips for', 'What nobody tells you about', 'The basics of'))} {arguments['query']}",
                "site": rng.choice(("example-magazine", "forum", "encyclopedia", "blog")),
                "snippet": rng.choice(
                    (
                        "Experts recommend starting small and adjusting after two weeks.",
                        "Most readers found the second approach easier to keep up.",
                        "Costs vary widely by region; get at least three quotes.",
                        "The short answer is that it depends on your situation.",
                    )
                ),
            }
            for _ in range(3)
        ],
    }


TOOLS: tuple[Tool, ...] = (
    Tool(
        name="lookup_order",
        request=(
            "Where's the {item} I ordered? It should have arrived by now.",
            "Can you check on the {item} order?",
        ),
        arguments=lambda rng, persona: {
            "order_id": code("99999999")(rng),
            "item": persona["item"],
        },
        result=_order_result,
        reply=(
            "It has left the warehouse and is on its way; the carrier says signature required, so someone needs to be home.",
            "The {item} is with the carrier now. I can remind you the day before it is due.",
        ),
        fact=Fact(
            "tracking",
            "identifier",
            code("1Z 99A 999 99"),
            (),
            ("What's the tracking number for the {item}?",),
            ("The delivery company wants a reference for the {item} parcel, which one was it?",),
        ),
    ),
    Tool(
        name="book_restaurant",
        request=(
            "Can you book a table for {n} on Friday? Somewhere nice but not stuffy.",
            "Please find us a table for {n} this weekend.",
        ),
        arguments=lambda rng, persona: {"party_size": rng.randint(2, 8), "day": "Friday"},
        result=_restaurant_result,
        reply=(
            "Done, you have a table. Free cancellation until the day before if plans change.",
            "Booked. They asked me to mention that the kitchen closes at ten.",
        ),
        fact=Fact(
            "reservation",
            "identifier",
            code("RSV-AA999"),
            (),
            ("What's the restaurant confirmation code?",),
            ("They want the code from when you got us the table, what is it?",),
        ),
    ),
    Tool(
        name="get_weather",
        request=(
            "What's the weather looking like in {city} this week?",
            "Will it rain in {city} over the next few days?",
        ),
        arguments=lambda rng, persona: {"city": persona["city"]},
        result=_weather_result,
        reply=(
            "Mixed week: pack a light jacket and an umbrella, the warm days are in the middle.",
            "Mostly fine, with one wet day. I would plan the outdoor things early in the week.",
        ),
    ),
    Tool(
        name="calendar_events",
        request=(
            "What does my week look like?",
            "Am I free any evening this week?",
        ),
        arguments=lambda rng, persona: {"range": "this week"},
        result=_calendar_result,
        reply=(
            "Busy but manageable; the evenings are mostly free apart from one.",
            "You have a few fixed things, but Wednesday evening looks open.",
        ),
    ),
    Tool(
        name="web_search",
        request=(
            "Can you look up how to {topic}?",
            "Search for some advice on how to {topic}, please.",
        ),
        arguments=lambda rng, persona: {"query": persona["topic"]},
        result=_search_result,
        reply=(
            "The common advice: start small, keep it simple, and check again after two weeks.",
            "Most sources agree it depends on the situation, but getting a few quotes is the usual first step.",
        ),
    ),
)

TOPICS = (
    "fix a dripping tap",
    "keep basil alive indoors",
    "stop a squeaky door",
    "get red wine out of a rug",
    "make sourdough starter",
    "train for a 10k",
    "negotiate a pay rise",
    "lower the electricity bill",
)

GREETINGS = (
    "Morning! Back again.",
    "Hey, it's me. Got a few minutes?",
    "Hi. Long day, but I wanted to catch up on a couple of things.",
    "Evening! {pet} is asleep on my feet so I can't go anywhere.",
    "Hello again, quick session before work.",
    "Hi! Coffee in hand, let's do this.",
)
GREETING_REPLIES = (
    "Good to hear from you. What's on your mind today?",
    "Of course, I'm here. Where would you like to start?",
    "Hello! Happy to help with whatever is on the list.",
)
SMALL_TALK = (
    "The weather has been strange all week, sunny one hour and hail the next.",
    "I watched a documentary about octopuses last night and now I feel bad about calamari.",
    "{partner} is learning the guitar, the same four chords, over and over.",
    "I finally tidied the garage, I found a box of cables from 2009.",
    "{kid} asked me today why the sky is blue and I realised I don't really know.",
    "Honestly I just need a holiday where nobody asks me anything.",
    "I tried making ramen from scratch, it took six hours and was fine.",
    "The neighbour's hedge trimmer started at seven this morning.",
)
SMALL_TALK_REPLIES = (
    "That sounds like a lot. It is nice that there are small good moments in between.",
    "Ha, that is a very relatable kind of day. I hope the evening is quieter.",
    "The sky is blue because air scatters short blue wavelengths of sunlight more than red ones.",
    "Six hours for fine ramen is still a win: the second batch is always better.",
)
CLOSINGS = (
    "Okay, that's all for now, thanks!",
    "Great, I'll come back to this later.",
    "Thanks, that helps. Talk soon.",
)
CLOSING_REPLIES = (
    "Anytime. Good luck with everything today.",
    "You're welcome. I'll be here when you're ready to pick it up again.",
)
ASIDES = (
    "One step at a time is fine.",
    "You do not have to decide today.",
    "I can put a reminder in the calendar if that helps.",
    "It might be worth writing the options down side by side.",
    "That is a very common worry, for what it is worth.",
    "If it helps, we can come back to this next time.",
    "Ask {partner} what matters most to them before choosing.",
    "Small fixes now usually save bigger ones later.",
    "Try not to let the perfect get in the way of the good here.",
    "There is rarely one right answer with this kind of thing.",
    "I would sleep on it and look again tomorrow morning.",
    "Whatever you choose, write down why, so future you remembers.",
)
ACKS = (
    "Makes sense.",
    "Okay, noted.",
    "Right, that's what I thought.",
    "Hm, good point.",
    "Thanks, I'll think about it.",
)
ANSWERS = (
    "That was {v}.",
    "You told me it's {v}.",
    "{v}, from what you said earlier.",
    "It's {v} — you mentioned it a while back.",
)
QUESTION_LEADS = ("", "", "Quick question: ", "Remind me, ", "Before I forget, ", "Sorry, ")
FOLLOW_UPS = (
    "Anything I should do about it this week?",
    "Does that sound right to you?",
    "I'm not sure how I feel about it yet.",
    "What would you do?",
)

MENTIONS: dict[str, tuple[str, ...]] = {
    # What a user says about a fact's subject without giving its value: the subject comes up
    # again and again, the value once, so a question's words match many turns besides the one
    # that answers it.
    "contractor": (
        "The contractor showed up two hours late today with no apology.",
        "I asked the contractor to send the name of the contractor he uses for electrics too.",
        "Should I trust a contractor who wants half the money up front?",
    ),
    "quote": (
        "Another company sent a quote that's twice as much for the same bathroom.",
        "I keep rereading the quote looking for hidden extras.",
    ),
    "tile": (
        "The tile shop says that colour code might be discontinued next year.",
        "{partner} now wants a darker tile colour for the floor, we'll see.",
    ),
    "permit": (
        "Do we really need a building permit just to move a sink?",
        "The permit office lost our form once already.",
    ),
    "demolition": (
        "I'm dreading the demolition noise, the neighbours will hate us.",
        "When the tearing out starts I'll work from the library.",
    ),
    "flight": (
        "Flight prices jumped again, glad we booked the outbound flight early.",
        "I hate early morning flights but the flight times were the only good ones.",
    ),
    "hotel": (
        "The hotel sent an email asking when we'll arrive.",
        "Is it worth paying extra at the hotel for a room with a view?",
    ),
    "departure": (
        "I'm counting the days until we leave.",
        "Work wants me to finish the report before the trip starts.",
    ),
    "booking": (
        "The apartment host seems nice, she sent a long message about the booking.",
        "I printed the booking confirmation in case my phone dies.",
    ),
    "travel_budget": (
        "Dinners in {city} are cheaper than I expected, good for the budget.",
        "We're already a bit over what we agreed to spend on the trip, I think.",
    ),
    "physio": (
        "The physio gave me a new set of exercises with a resistance band.",
        "My physiotherapist says I'm doing the knee exercises too fast.",
    ),
    "dose": (
        "The anti-inflammatory makes me a bit sleepy in the afternoon.",
        "Should I take the tablets with breakfast or dinner?",
    ),
    "checkup": (
        "I need to write down my questions for the knee specialist.",
        "The specialist's office called to confirm my details.",
    ),
    "race_goal": (
        "I ran 8k today at my goal pace and nearly died.",
        "Registration for the autumn 10k opens soon.",
    ),
    "recruiter": (
        "The recruiter called again, just to 'check in', third time this week.",
        "I emailed the recruiter my references this morning.",
        "Is it normal for a recruiter to ask about my current salary?",
    ),
    "interview": (
        "I'm nervous about the final interview, four hours is a marathon.",
        "What should I wear to an in-person interview these days?",
    ),
    "offer": (
        "I'm not sure the offer is good enough to leave my current job.",
        "Should I ask them to put the offer in writing before I answer?",
    ),
    "requisition": (
        "HR sent me a form with a dozen boxes about the job posting.",
        "The job posting has been taken down, is that a bad sign?",
    ),
    "mechanic": (
        "The mechanic said the brakes have maybe six months left.",
        "I like that the mechanic explains things without being condescending.",
    ),
    "plate": (
        "The registration paperwork finally arrived in the post.",
        "I need the plate number for the parking permit form, I'll look it up.",
    ),
    "mileage": (
        "We drive way more miles than I thought, mostly school runs.",
        "The service book says the next service is due at a round number of miles.",
    ),
    "warranty": (
        "The gearbox feels rough, I hope the warranty covers it.",
        "Does a warranty still count if we used a different garage?",
    ),
    "teacher": (
        "The new class teacher sent a very long welcome letter.",
        "{kid} says the teacher is strict but fair, which is high praise.",
    ),
    "conference": (
        "I want to ask at the conference about the maths seating plan.",
        "{partner} might not make it to the parent-teacher conference.",
    ),
    "locker": (
        "{kid} forgot the locker combination again and had to go to the office.",
        "The school lockers are tiny, the coat doesn't fit.",
    ),
    "trip_cost": (
        "The field trip letter had three pages of rules.",
        "Is the field trip worth it if {kid} isn't keen?",
    ),
    "vet": (
        "The vet's receptionist remembered {pet}'s name, which was sweet.",
        "Our vet wants {pet} to lose a little weight.",
    ),
    "chip": (
        "I need to update {pet}'s microchip details with the new address.",
        "Do microchip numbers ever get re-used?",
    ),
    "weight": (
        "{pet} is getting heavier, fewer treats from now on.",
        "I tried to weigh {pet} on the bathroom scales, it did not go well.",
    ),
    "booster": (
        "The vet clinic sent a reminder about {pet}'s vaccinations.",
        "Do boosters make {pet} sleepy for a day?",
    ),
    "accountant": (
        "The accountant wants every receipt scanned, not photographed.",
        "I sent our accountant the mortgage statements.",
    ),
    "refund": (
        "The tax office says refunds are slow this year.",
        "I've already mentally spent the tax refund twice.",
    ),
    "policy": (
        "The insurance company sent a renewal letter for the home policy.",
        "Does our home insurance cover burst pipes?",
    ),
    "rate": (
        "Mortgage rates are all over the news again.",
        "The bank keeps emailing me about rates, it's exhausting.",
    ),
    "caterer": (
        "The caterer asked about allergies, I have no idea who's allergic to what.",
        "Should we tip the caterer's staff on the night?",
    ),
    "guests": (
        "The guest list keeps changing every day.",
        "How many chairs do we need if some guests stand?",
    ),
    "deposit": (
        "The venue wants the rest of the money a month before the party.",
        "I hope we get the deposit back if it rains.",
    ),
    "party_date": (
        "I hope it doesn't clash with the football on the party date.",
        "{sister} almost booked a holiday on the party weekend.",
    ),
    "movers": (
        "The movers want an inventory of everything, room by room.",
        "Do you tip movers? How much?",
    ),
    "move_date": (
        "Packing is going slower than I hoped before the move.",
        "I should book time off work for the move.",
    ),
    "storage": (
        "The storage unit smelled a bit damp when I visited.",
        "How long do people usually keep a storage unit after a move?",
    ),
    "wifi": (
        "The internet at the new place is slow, we might need a new router.",
        "The landlord left a pile of manuals on the fridge.",
    ),
    "tracking": (
        "The delivery company's tracking page hasn't updated in two days.",
        "Why does every parcel need a signature these days?",
    ),
    "reservation": (
        "I'm looking forward to dinner out, it's been ages.",
        "Should we bring anything to the restaurant for the birthday?",
    ),
}
