#!/usr/bin/env python3
# ruff: noqa: E501
"""Write bench/data/realistic.jsonl, the hand-written labelled set of bench/detection.py.

Every scenario below is a question with its retrieved chunks (the relevant ones and
some the retriever fetched by mistake) and several answers written the way an LLM
RAG service answers: fluent paraphrase, each answer with its category. The label
follows from the category: ``faithful_paraphrase``, ``multi_chunk`` and ``evasive``
answers are not hallucinated, every other category is.

The split is by scenario, so the chunks of a holdout record are never seen while
tuning: scenarios are shuffled with ``SEED`` and taken into ``holdout`` in that
order while no category goes over 40 % of its records. ``SEED`` is the first of
1..999 that leaves every category within 3 points of 40 % (picked from the counts
alone, before any judge had scored the set). Running the script twice
writes the same bytes; ``--check`` fails when the committed file differs.

Usage: ``python3 bench/data/make_realistic.py [--check]``.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

SEED = 21
HOLDOUT_SHARE = 0.4
OUT = Path(__file__).resolve().parent / "realistic.jsonl"

FAITHFUL = frozenset({"faithful_paraphrase", "multi_chunk", "evasive"})
CATEGORIES = (
    "faithful_paraphrase",
    "multi_chunk",
    "swapped_entity",
    "swapped_number",
    "swapped_date",
    "swapped_role",
    "negation",
    "added_claim",
    "evasive",
)


@dataclass(frozen=True)
class Answer:
    category: str
    response: str
    #: a different question for this answer (same chunks); None: the scenario's
    question: str | None = None


@dataclass(frozen=True)
class Scenario:
    domain: str
    question: str
    contexts: tuple[str, ...]
    answers: tuple[Answer, ...]


A = Answer

SCENARIOS: tuple[Scenario, ...] = (
    # 1
    Scenario(
        "hr_policy",
        "Can I keep my unused holiday days for next year?",
        (
            "Annual leave carry-over. Employees may carry over up to five unused days of annual leave into the next calendar year. Carried-over days must be taken by 31 March; days not taken by then are forfeited.",
            "Parental leave is 16 weeks at full pay for the primary caregiver.",
            "The office is closed between 24 December and 1 January; these days do not count against your leave.",
        ),
        (
            A(
                "faithful_paraphrase",
                "Yes, but only a few of them: you can bring up to five days you haven't used into the following year. Just make sure you take them before the end of March, because after that they're gone.",
            ),
            A(
                "swapped_number",
                "Yes. You're allowed to roll over as many as ten untaken days into next year, as long as you use them by the end of March.",
            ),
            A(
                "swapped_date",
                "You can move up to five unused days into the new year. They need to be used by 30 June, otherwise you lose them.",
            ),
        ),
    ),
    # 2
    Scenario(
        "it_helpdesk",
        "What laptop will I get as a new designer?",
        (
            "Standard hardware. Engineers receive a 16-inch MacBook Pro with 32 GB of memory. Designers receive a 14-inch MacBook Pro with 18 GB of memory and a colour-calibrated external display. All other staff receive a 13-inch MacBook Air.",
            "Lost badges must be reported to Security within 24 hours.",
        ),
        (
            A(
                "faithful_paraphrase",
                "As a designer you'll be given a 14\" MacBook Pro with 18 GB of RAM, and it comes with a colour-calibrated external monitor.",
            ),
            A(
                "swapped_role",
                'You\'ll be handed the big 16" MacBook Pro with 32 GB of RAM; the smaller 14" one with the colour-accurate monitor is what engineers are given.',
            ),
            A(
                "added_claim",
                "You'll get a 14-inch MacBook Pro with 18 GB of memory plus a calibrated external display. If you prefer, you can ask for a Windows workstation instead.",
            ),
        ),
    ),
    # 3
    Scenario(
        "hr_policy",
        "How much notice do I need to give if I quit during my probation?",
        (
            "The probation period is six months for all new hires, and three months for managers promoted internally.",
            "During probation either party may end the employment contract with one week's notice. After probation the notice period is one month.",
            "Employees can request a standing desk through the facilities portal.",
        ),
        (
            A(
                "faithful_paraphrase",
                "While you're still on probation, a week's notice is enough, and the company can likewise end things with a week's notice.",
            ),
            A(
                "multi_chunk",
                "New hires are on probation for their first six months. Within that window a week's notice from either side ends the contract; once probation is over, you'd have to give a month.",
                "What are the notice rules for new starters?",
            ),
            A(
                "swapped_number",
                "During probation you'd have to give two weeks' notice. After probation it goes up to one month.",
            ),
            A(
                "negation",
                "Probation doesn't shorten anything: you cannot leave on short notice, and the one-month notice period applies from your first day.",
            ),
        ),
    ),
    # 4
    Scenario(
        "it_helpdesk",
        "How do I get on the VPN from home?",
        (
            "To connect to the corporate VPN, install the Pulse Secure client from the Software Center and sign in with your network ID. Multi-factor authentication with the Authenticator app is required for every connection.",
            "VPN sessions disconnect automatically after 12 hours.",
            "Printers on floor 3 are being replaced on 14 May.",
        ),
        (
            A(
                "faithful_paraphrase",
                "Grab the Pulse Secure client from Software Center, then log in using your network ID. You'll be asked to approve each connection in the Authenticator app, since MFA is mandatory.",
            ),
            A(
                "swapped_entity",
                "Install the GlobalProtect client from Software Center and sign in with your network ID; you'll need to approve the login in the Authenticator app every time.",
            ),
            A(
                "added_claim",
                "Install Pulse Secure from Software Center and sign in with your network ID, confirming with the Authenticator app. It also works on your personal laptop if you don't have a company one with you.",
            ),
            A(
                "multi_chunk",
                "Here's how:\n- install Pulse Secure from the Software Center\n- sign in with your network ID\n- approve the MFA prompt in Authenticator\nThe session drops on its own after 12 hours, so on long days you'll have to reconnect.",
            ),
        ),
    ),
    # 5
    Scenario(
        "it_helpdesk",
        "I forgot my password and never registered my phone. What now?",
        (
            "Passwords must be at least 14 characters long and are changed every 180 days.",
            "You can reset a forgotten password at reset.corp.example with your registered mobile number. If no number is registered, call the service desk on extension 4400.",
            "Guest Wi-Fi vouchers are available at reception.",
        ),
        (
            A(
                "faithful_paraphrase",
                "Since you don't have a mobile number on file, the self-service reset won't work for you. Ring the service desk on extension 4400 and they'll sort it out.",
            ),
            A(
                "swapped_number",
                "Without a registered phone you'll need to call the service desk on extension 4040.",
            ),
            A(
                "evasive",
                "I'm not certain how resets work without a registered number. It's probably best to ask the service desk directly.",
            ),
            A(
                "negation",
                "The service desk can't reset passwords, so you'll have to use reset.corp.example anyway, even without a registered phone.",
            ),
        ),
    ),
    # 6
    Scenario(
        "billing",
        "I bought the annual plan six weeks ago. Can I get my money back?",
        (
            "Refunds. Annual plans can be refunded in full within 30 days of purchase. After 30 days, refunds are prorated for the unused months, minus a 10% processing fee.",
            "Monthly plans are not refundable, but you can cancel at any time and keep access until the end of the current billing period.",
            "Invoices are available as PDF under Settings > Billing.",
        ),
        (
            A(
                "faithful_paraphrase",
                "Since it's been more than 30 days, a full refund is no longer possible, but you can still get back the part covering the months you haven't used, less a 10% processing fee.",
            ),
            A(
                "swapped_number",
                "Because you're past the first 30 days, you'll get a prorated refund for the unused months, minus a 15% processing fee.",
            ),
            A(
                "negation",
                "Unfortunately annual plans can't be refunded once they've been bought; you can only cancel and keep access until the end of the term.",
            ),
            A(
                "added_claim",
                "You're outside the 30-day full-refund window, so you'd get a prorated refund for the unused months minus a 10% fee. It usually reaches your card within 5 to 7 business days.",
            ),
        ),
    ),
    # 7
    Scenario(
        "billing",
        "If I cancel my monthly subscription today, do I lose access right away?",
        (
            "Monthly plans are not refundable, but you can cancel at any time and keep access until the end of the current billing period.",
            "Annual plans can be refunded in full within 30 days of purchase.",
            "Your subscription renews automatically on the 1st of each month.",
        ),
        (
            A(
                "faithful_paraphrase",
                "No. You can cancel whenever you like and you'll keep using the service until the current billing period runs out. Just note that monthly plans don't get refunds.",
            ),
            A(
                "negation",
                "Yes, cancelling a monthly plan ends your access immediately, though you won't be charged again.",
            ),
            A(
                "evasive",
                "I don't have details on how cancellation affects access. Our billing team can confirm that for you.",
            ),
            A(
                "swapped_date",
                "You keep access until the end of the period. The plan renews automatically on the 15th of every month, so cancel before then to avoid the next charge.",
                "When does my monthly plan renew?",
            ),
        ),
    ),
    # 8
    Scenario(
        "billing",
        "What happens if we don't pay an invoice?",
        (
            "Invoices are due 14 days after the issue date. A late fee of 2% of the outstanding amount is added on the first day after the due date.",
            "Accounts more than 30 days overdue are suspended. Data is kept for 90 days after suspension and then deleted.",
            "You can add up to five billing contacts to an account.",
        ),
        (
            A(
                "multi_chunk",
                "You have 14 days from the invoice date to pay. If it's late, a 2% fee on the unpaid balance is added right away; once it's more than 30 days overdue the account is suspended, and 90 days after that your data is deleted.",
            ),
            A(
                "swapped_number",
                "You've got two weeks from the invoice date. Pay late and 2% of what you owe is added, and once you're 60 days behind the account gets switched off, with your data erased 90 days after that.",
            ),
            A(
                "added_claim",
                "You'd pay a 2% late fee after the 14-day due date, and at 30 days overdue the account is suspended. At that point the debt is also passed to a collection agency.",
            ),
            A(
                "evasive",
                "That depends on your contract, so I'd rather not guess. Please reach out to your account manager.",
            ),
        ),
    ),
    # 9
    Scenario(
        "medicine",
        "How many ibuprofen tablets can I take in a day?",
        (
            "Adults and children over 12 years: take one or two 200 mg tablets every four to six hours as needed. Do not take more than six tablets in any 24 hours.",
            "Do not take this medicine if you are in the last three months of pregnancy.",
            "Take the tablets with or after food.",
            "Store below 25 °C in the original package.",
        ),
        (
            A(
                "faithful_paraphrase",
                "For adults, the most you should have in any 24-hour period is six 200 mg tablets. Each dose is one or two tablets, and you should leave at least four hours between doses.",
            ),
            A(
                "swapped_number",
                "Take one or two 200 mg tablets at a time, spacing doses four to six hours apart, and don't go beyond eight tablets a day.",
            ),
            A(
                "added_claim",
                "Up to six 200 mg tablets in 24 hours, in doses of one or two every four to six hours. It's fine to combine them with paracetamol if you need extra relief.",
            ),
            A(
                "negation",
                "The daily limit is six 200 mg tablets. Take them on an empty stomach so they work faster.",
            ),
        ),
    ),
    # 10
    Scenario(
        "medicine",
        "Is it safe to take these while pregnant?",
        (
            "Do not take this medicine if you are in the last three months of pregnancy.",
            "Adults and children over 12 years: take one or two 200 mg tablets every four to six hours as needed.",
            "Each tablet contains 200 mg ibuprofen. Other ingredients: lactose, maize starch, talc.",
        ),
        (
            A(
                "faithful_paraphrase",
                "Not in the final trimester: the leaflet says you shouldn't use this medicine during the last three months of pregnancy.",
            ),
            A(
                "evasive",
                "I'm not able to give medical advice about pregnancy. Please speak to your doctor or pharmacist before taking any medicine.",
            ),
            A(
                "negation",
                "Yes, the leaflet allows it throughout pregnancy as long as you stay within the normal dose of one or two tablets.",
            ),
        ),
    ),
    # 11
    Scenario(
        "medicine",
        "What should I do if I get a rash while taking amoxicillin?",
        (
            "Amoxicillin 500 mg capsules: the usual adult dose is one capsule three times a day for 5 to 7 days.",
            "Tell your doctor if you are allergic to penicillin; amoxicillin is a penicillin antibiotic.",
            "Common side effects include diarrhoea and nausea. If you develop a skin rash, stop taking the capsules and contact your doctor.",
            "Keep out of the sight and reach of children.",
        ),
        (
            A(
                "faithful_paraphrase",
                "Stop the capsules and get in touch with your doctor if a rash shows up.",
            ),
            A(
                "negation",
                "A mild rash is a common side effect and isn't a reason to stop. Keep taking the capsules and mention it at your next appointment.",
            ),
            A(
                "multi_chunk",
                "A rash means you should stop taking it and call your doctor. Bear in mind that amoxicillin belongs to the penicillin family, so if you've ever reacted to penicillin your doctor needs to know.",
            ),
            A(
                "swapped_number",
                "Adults usually take a single 500 mg capsule two times daily, over roughly a week (5 to 7 days).",
                "How often do I take amoxicillin 500 mg?",
            ),
        ),
    ),
    # 12
    Scenario(
        "travel",
        "What baggage is included in an economy ticket?",
        (
            "Economy fares include one carry-on bag up to 8 kg and 55 x 40 x 23 cm. Checked baggage is not included; it costs EUR 35 per bag when added online or EUR 60 at the airport.",
            "Business fares include two checked bags of up to 32 kg each.",
            "Pets under 8 kg may travel in the cabin on flights shorter than four hours.",
        ),
        (
            A(
                "faithful_paraphrase",
                "With economy you get a single cabin bag, which can weigh up to 8 kg and measure at most 55 × 40 × 23 cm. Checked luggage isn't part of the fare: adding a bag online costs €35, or €60 if you do it at the airport.",
            ),
            A(
                "swapped_number",
                "You can bring one cabin bag weighing as much as 10 kg, within 55 × 40 × 23 cm. Anything going in the hold is extra: €35 if you add it on the website, €60 at the desk.",
            ),
            A(
                "swapped_entity",
                "You're allowed two suitcases in the hold, each as heavy as 32 kg, and a small 8 kg bag to take on board.",
            ),
            A(
                "added_claim",
                "One 8 kg cabin bag is included (max 55 × 40 × 23 cm), and you can bring a small personal item such as a handbag on top of that. Checked bags cost extra: €35 online, €60 at the airport.",
            ),
        ),
    ),
    # 13
    Scenario(
        "travel",
        "My 2,000 km flight arrived 4 hours late. How much compensation can I get?",
        (
            "If your flight arrives more than three hours late, you may be entitled to compensation: EUR 250 for flights up to 1,500 km, EUR 400 for flights between 1,500 and 3,500 km, and EUR 600 for longer flights.",
            "Compensation is not due when the delay is caused by extraordinary circumstances such as severe weather or an air traffic control strike.",
            "Check-in closes 45 minutes before departure.",
        ),
        (
            A(
                "multi_chunk",
                "A 2,000 km flight falls in the 1,500–3,500 km band, so with a delay of more than three hours you could be owed €400, unless the delay was caused by something extraordinary such as severe weather or an air traffic control strike.",
            ),
            A(
                "swapped_number",
                "With a distance like that and a four-hour delay, you'd be looking at €250.",
            ),
            A(
                "negation",
                "You're entitled to €400 for that distance, and the airline has to pay it whatever caused the delay.",
            ),
            A(
                "evasive",
                "I can't say whether you qualify; it depends on your specific case. I'd suggest filing a claim and waiting for the airline's assessment.",
            ),
        ),
    ),
    # 14
    Scenario(
        "travel",
        "Can I check out late?",
        (
            "Check-in is from 15:00 and check-out is until 11:00. Late check-out until 14:00 can be requested at reception for EUR 30, subject to availability.",
            "Breakfast is served from 6:30 to 10:30 in the ground-floor restaurant.",
            "The rooftop pool is open from May to September.",
        ),
        (
            A(
                "faithful_paraphrase",
                "Normally you'd need to leave by 11 a.m., but you can ask reception to let you stay until 2 p.m. for €30 if they have the room free.",
            ),
            A(
                "swapped_date",
                "Usually you have to be out by 11, but the front desk can let you keep the room until 4 p.m. for €30 if it isn't needed.",
            ),
            A(
                "added_claim",
                "Yes, you can request a late check-out until 14:00 at reception for €30, depending on availability. Gold loyalty members get it free of charge.",
            ),
        ),
    ),
    # 15
    Scenario(
        "legal_terms",
        "Who owns the data we upload to the service?",
        (
            "Customer Data. The Customer retains ownership of all Customer Data. The Provider may use aggregated, anonymised usage statistics to improve the Service.",
            "Either party may terminate this Agreement for convenience with 60 days' written notice.",
            "This Agreement is governed by the laws of Ireland.",
        ),
        (
            A(
                "faithful_paraphrase",
                "Your company keeps ownership of everything you upload. The provider is only allowed to use anonymised, aggregated usage statistics, and only to improve the service.",
            ),
            A(
                "swapped_role",
                "The provider owns the data uploaded to the service, while you keep the right to use aggregated, anonymised statistics about it.",
            ),
            A(
                "added_claim",
                "You keep ownership of your data, and the provider may only use anonymised aggregate usage stats. When the contract ends, they delete your data within 30 days.",
            ),
        ),
    ),
    # 16
    Scenario(
        "legal_terms",
        "How can we end the contract, and what is the provider's liability cap?",
        (
            "Either party may terminate this Agreement for convenience with 60 days' written notice.",
            "Limitation of liability. The Provider's total liability under this Agreement shall not exceed the fees paid by the Customer in the 12 months preceding the claim.",
            "The Provider will make commercially reasonable efforts to keep the Service available 99.9% of the time.",
            "This Agreement is governed by the laws of Ireland.",
        ),
        (
            A(
                "multi_chunk",
                "Either side can walk away for convenience by giving 60 days' notice in writing. As for liability, the provider's total exposure is capped at whatever you paid in fees over the 12 months before the claim.",
            ),
            A(
                "swapped_number",
                "Either of you can leave without cause by writing to the other a month (30 days) ahead. The provider's exposure tops out at what you paid them over the past year.",
            ),
            A(
                "swapped_role",
                "Both sides can end it by giving two months' notice in writing. On liability, it's your company's exposure that's limited: at most the fees you paid over the year before a claim.",
            ),
            A(
                "swapped_entity",
                "Either party may end it with 60 days' written notice, liability is limited to the last 12 months of fees, and the agreement falls under English law.",
                "Which law governs the agreement and how do we terminate it?",
            ),
        ),
    ),
    # 17
    Scenario(
        "legal_terms",
        "Who pays when the boiler breaks and the repair costs EUR 450?",
        (
            "Repairs. The tenant is responsible for minor repairs costing up to EUR 100 per incident. Repairs above this amount and all structural repairs are the landlord's responsibility.",
            "The deposit equals three months' rent and is returned within two months after the tenancy ends, minus any documented damage.",
            "Pets are allowed with the landlord's written consent.",
        ),
        (
            A(
                "faithful_paraphrase",
                "At €450 the repair is well over the €100 limit for small repairs, so it's the landlord who has to cover it.",
            ),
            A(
                "swapped_role",
                "Because the repair is over €100, it falls to you as the tenant; the landlord only handles structural work.",
            ),
            A(
                "evasive",
                "I'd recommend checking your own lease or speaking with a tenants' association. I can't give legal advice on that.",
            ),
            A(
                "swapped_number",
                "You put down two months of rent as a deposit; it comes back within two months after you leave, less any damage that's been recorded.",
                "How big is the deposit and when do I get it back?",
            ),
        ),
    ),
    # 18
    Scenario(
        "product_docs",
        "What happens when I go over the rate limit on the Standard plan?",
        (
            "Rate limits. The REST API allows 600 requests per minute per API key on the Standard plan and 3,000 per minute on Enterprise.",
            "When the limit is exceeded, the API returns HTTP 429 with a Retry-After header giving the number of seconds to wait.",
            "The Python SDK supports Python 3.9 and later.",
        ),
        (
            A(
                "multi_chunk",
                "On Standard you get 600 requests a minute per key. Go past that and the API answers with a 429, including a Retry-After header that tells you how many seconds to back off.",
            ),
            A(
                "swapped_number",
                "Standard keys are capped at 600 requests per minute; above that you'll get HTTP 503 along with a Retry-After header.",
            ),
            A(
                "swapped_entity",
                "Past 600 requests a minute the API returns 429, and the X-RateLimit-Reset header tells you how long to wait.",
            ),
            A(
                "added_claim",
                "Beyond 600 requests per minute you get a 429 and a Retry-After header. Rejected requests still count towards your monthly quota, so back off promptly.",
            ),
        ),
    ),
    # 19
    Scenario(
        "product_docs",
        "If I rotate my API key, does the old one stop working immediately?",
        (
            "API keys can be rotated in the dashboard under Settings > API. After rotation the old key remains valid for 24 hours.",
            "Each account can hold up to 10 active keys.",
            "Webhooks are signed with HMAC-SHA256.",
        ),
        (
            A(
                "faithful_paraphrase",
                "No. The old key keeps working for a day after you rotate it, so you have 24 hours to switch your clients over.",
            ),
            A(
                "negation",
                "Yes. Rotating a key in the dashboard invalidates the old one straight away, so update your clients first.",
            ),
            A(
                "swapped_number",
                "The old key stays valid for 48 hours after rotation, which gives you two days to update your integrations.",
            ),
        ),
    ),
    # 20
    Scenario(
        "product_docs",
        "My thermostat won't join my 5 GHz Wi-Fi. Why?",
        (
            "Connectivity. The thermostat connects to 2.4 GHz Wi-Fi networks only.",
            "To reset the thermostat to factory settings, hold the dial down for 10 seconds until the display shows RESET, then release it.",
            "The thermostat runs on two AA batteries, which last about 12 months. A low-battery icon appears two weeks before they run out.",
            "The warranty is two years from the date of purchase.",
        ),
        (
            A(
                "faithful_paraphrase",
                "It simply doesn't support 5 GHz: the thermostat only works with 2.4 GHz Wi-Fi, so you'll need to connect it to a 2.4 GHz network.",
            ),
            A(
                "negation",
                "The thermostat supports both 2.4 and 5 GHz, so the problem is more likely your password. Try a factory reset by holding the dial for 10 seconds.",
            ),
            A(
                "added_claim",
                "It's limited to 2.4 GHz Wi-Fi. Most routers let you split the bands, or you can buy our Wi-Fi bridge accessory to put it on a 5 GHz network.",
            ),
            A(
                "swapped_number",
                "Press and hold the dial for about 5 seconds until RESET appears on the display, then let go.",
                "How do I factory-reset the thermostat?",
            ),
        ),
    ),
    # 21
    Scenario(
        "finance",
        "What interest does the Flex Saver pay, and can I take money out?",
        (
            "The Flex Saver account pays 3.1% AER variable interest, calculated daily and paid monthly.",
            "You can make up to three withdrawals per calendar year without penalty. Further withdrawals in the same year reduce the rate to 1.0% AER for the rest of that year.",
            "The minimum opening deposit is GBP 500.",
            "Our branches are open Monday to Saturday.",
        ),
        (
            A(
                "multi_chunk",
                "Flex Saver pays a variable 3.1% AER, worked out daily and credited monthly. You can withdraw up to three times a year without penalty; go beyond that and your rate drops to 1.0% AER for the rest of the year.",
            ),
            A(
                "swapped_number",
                "It pays 3.1% AER. You get up to five penalty-free withdrawals a year, after which the rate drops to 1.0%.",
            ),
            A(
                "added_claim",
                "The rate is 3.1% AER variable, paid monthly, with three free withdrawals a year. Your savings are also protected up to GBP 85,000 by the deposit guarantee scheme.",
            ),
            A(
                "faithful_paraphrase",
                "If I'm reading this correctly, the rate is 3.1% AER (variable), and you should be fine taking money out up to three times a year; more than that and the rate falls to 1.0% for the rest of that year.",
            ),
        ),
    ),
    # 22
    Scenario(
        "finance",
        "I spent EUR 800 on a conference ticket. Who approves my expense claim?",
        (
            "Expense claims must be submitted within 60 days of the purchase, with an itemised receipt.",
            "Claims up to EUR 500 are approved by the line manager; claims above EUR 500 are approved by the finance controller.",
            "Reimbursements are paid with the next monthly payroll.",
            "The canteen accepts card payments only.",
        ),
        (
            A(
                "faithful_paraphrase",
                "At €800 you're over the €500 threshold, so the finance controller signs it off rather than your line manager.",
            ),
            A(
                "swapped_role",
                "Since it's above €500, your line manager approves it; the finance controller only deals with claims under €500.",
            ),
            A(
                "multi_chunk",
                "An €800 claim goes to the finance controller, since it's over €500. File it within 60 days with an itemised receipt, and the money arrives with your next monthly pay.",
            ),
            A(
                "swapped_number",
                "Claims above €1,000 need the finance controller. Yours is €800, so your line manager can approve it.",
            ),
        ),
    ),
    # 23
    Scenario(
        "science",
        "When and how was the James Webb Space Telescope launched?",
        (
            "The James Webb Space Telescope launched on 25 December 2021 from Kourou, French Guiana, aboard an Ariane 5 rocket.",
            "It orbits the Sun near the second Lagrange point (L2), about 1.5 million kilometres from Earth.",
            "Its primary mirror is 6.5 metres across and made of 18 gold-coated beryllium segments.",
            "The Hubble Space Telescope was launched in 1990.",
        ),
        (
            A(
                "faithful_paraphrase",
                "It lifted off on Christmas Day 2021, on an Ariane 5 from Kourou in French Guiana.",
            ),
            A(
                "swapped_date",
                "Webb went up on Christmas Day 2022, carried by an Ariane 5 from the spaceport in Kourou.",
            ),
            A(
                "swapped_entity",
                "A Falcon Heavy carried it into space from French Guiana on Christmas Day 2021.",
            ),
            A(
                "multi_chunk",
                "The main mirror spans 6.5 m and is built from 18 beryllium segments with a gold coating. The telescope sits near L2, roughly 1.5 million km from Earth, circling the Sun.",
                "Tell me about Webb's mirror and where it is.",
            ),
            A(
                "swapped_number",
                "The main mirror measures 8.5 m across and is assembled from 18 beryllium pieces with a thin gold layer.",
                "How big is Webb's mirror?",
            ),
        ),
    ),
    # 24
    Scenario(
        "science",
        "At what temperature does water boil at 1,500 m altitude?",
        (
            "At sea level, water boils at 100 °C. The boiling point drops by roughly 1 °C for every 300 metres of altitude.",
            "Salt raises the boiling point only slightly: 20 g of salt per litre raises it by about 0.3 °C.",
            "Pressure cookers raise the pressure to about 2 bar.",
        ),
        (
            A(
                "faithful_paraphrase",
                "Roughly 95 °C. You lose about one degree for every 300 m you climb, and 1,500 m is five of those steps below the 100 °C you get at sea level.",
            ),
            A(
                "swapped_number",
                "Water boils at 100 °C at sea level and the boiling point falls about 1 °C every 150 m, so at 1,500 m it's around 90 °C.",
            ),
            A(
                "negation",
                "Not at all: salt has no effect on the boiling point, whatever amount you add.",
                "Does adding salt make pasta water boil hotter?",
            ),
            A(
                "faithful_paraphrase",
                "Only a little. About 20 g per litre pushes the boiling point up by roughly 0.3 °C, which you'd hardly notice.",
                "Does adding salt make pasta water boil hotter?",
            ),
        ),
    ),
    # 25
    Scenario(
        "insurance",
        "How much will I pay to replace my windscreen?",
        (
            "Your policy excess is EUR 300 per claim. Windscreen repairs carry no excess; a windscreen replacement has an excess of EUR 100.",
            "A courtesy car is provided while your car is repaired at one of our approved garages.",
            "Claims must be reported within 30 days of the incident.",
            "You can pay your premium monthly by direct debit.",
        ),
        (
            A(
                "faithful_paraphrase",
                "A replacement windscreen comes with a €100 excess. If it can be repaired instead, you won't pay any excess at all.",
            ),
            A(
                "swapped_number",
                "Replacing the windscreen carries the standard €300 excess, while repairs are free.",
            ),
            A(
                "evasive",
                "It depends on the details of your cover. I'd check your policy schedule or give our claims line a call.",
            ),
            A(
                "added_claim",
                "You'd pay the €100 excess for a replacement; repairs have no excess. A windscreen claim won't affect your no-claims discount either.",
            ),
            A(
                "negation",
                "No. Courtesy cars aren't included, even when the repair is done at one of the approved garages.",
                "Will I get a courtesy car while mine is in the garage?",
            ),
            A(
                "faithful_paraphrase",
                "Yes, as long as the repair is done at one of our approved garages you'll have a courtesy car while yours is being fixed.",
                "Will I get a courtesy car while mine is in the garage?",
            ),
        ),
    ),
    # 26
    Scenario(
        "hr_policy",
        "How much paid leave does a non-birthing parent get?",
        (
            "Parental leave. Birthing parents receive 20 weeks of parental leave at full pay. Non-birthing parents receive 10 weeks at full pay.",
            "Leave must start within 12 months of the birth or adoption.",
            "Notify your manager and the People team at least eight weeks before your leave begins.",
            "The company pension matches contributions up to 5% of salary.",
        ),
        (
            A("faithful_paraphrase", "Ten weeks, on full pay."),
            A(
                "swapped_role",
                "As the partner who didn't give birth, you'd get 20 fully paid weeks; the parent who gave birth gets 10.",
            ),
            A(
                "multi_chunk",
                "As the non-birthing parent you'd get 10 weeks fully paid. You need to start it within a year of the birth or adoption, and tell both your manager and the People team at least eight weeks ahead.",
            ),
            A(
                "swapped_number",
                "You're entitled to 12 weeks at full pay, which you can take any time within 12 months of the birth.",
            ),
        ),
    ),
    # 27
    Scenario(
        "hr_policy",
        "Can I fly business class to Singapore? It's a 13-hour flight.",
        (
            "Flights under six hours must be booked in economy class. For flights of six hours or longer, premium economy is allowed; business class requires approval from a vice president.",
            "Book all travel through the TravelDesk portal at least 14 days in advance.",
            "Company cars are assigned by the fleet team.",
        ),
        (
            A(
                "faithful_paraphrase",
                "For a 13-hour flight you can book premium economy without special sign-off. Business class is possible too, but only if a vice president approves it.",
            ),
            A(
                "negation",
                "Yes, for a trip that long you're free to book business; nobody needs to sign it off.",
            ),
            A(
                "swapped_entity",
                "Since the flight is over six hours, business class is possible once your line manager approves it.",
            ),
            A("evasive", "I'm not sure about that. I'd suggest checking with HR."),
        ),
    ),
    # 28
    Scenario(
        "it_helpdesk",
        "I left my laptop on the train. What do I do?",
        (
            "If your laptop is lost or stolen, report it to the IT service desk within one hour and to the police within 24 hours.",
            "All company laptops use BitLocker full-disk encryption. IT can wipe a device remotely once it has been reported.",
            "Monitors can be ordered through the hardware catalogue.",
        ),
        (
            A(
                "multi_chunk",
                "Tell the IT service desk within the hour and file a police report within 24 hours. The drive is encrypted with BitLocker, and once you've reported it IT can wipe the laptop remotely.",
            ),
            A(
                "swapped_role",
                "Call the police straight away, within the hour, and let the IT helpdesk know within a day. Once they know, they can erase the machine from afar.",
            ),
            A(
                "swapped_entity",
                "Report it to the service desk within an hour and to the police within a day. Don't worry too much about the data: the disk is protected with FileVault.",
            ),
            A(
                "evasive",
                "Sorry, I don't have information about lost devices. Please contact IT support.",
            ),
        ),
    ),
    # 29
    Scenario(
        "telecom",
        "I'm going to Canada for a week. How much will roaming cost?",
        (
            "Roaming in EU countries is included in all plans at no extra cost, up to your normal data allowance.",
            "Outside the EU, World Pass costs GBP 6 per day and lets you use your allowance abroad. It is charged only on days you use your phone.",
            "Calls to UK numbers from abroad count towards your monthly minutes.",
            "eSIMs can be activated in the app.",
        ),
        (
            A(
                "faithful_paraphrase",
                "Canada is outside the EU, so you'd be on World Pass: £6 for each day you actually use your phone, which gives you your normal allowance there. For a whole week that's at most £42.",
            ),
            A(
                "swapped_number",
                "Canada isn't covered by EU roaming, so World Pass applies: £8 for each day you actually use your phone there.",
            ),
            A(
                "added_claim",
                "Canada isn't in the EU, so World Pass applies at £6 per day of use. Incoming calls are free while you're abroad.",
            ),
            A(
                "negation",
                "World Pass is billed for every day of your trip, whether you use your phone or not, so budget £6 a day.",
            ),
        ),
    ),
    # 30
    Scenario(
        "ecommerce",
        "How long do I have to send back shoes I ordered, and is return shipping free?",
        (
            "You can return most items within 30 days of delivery for a full refund. Items must be unused and in their original packaging.",
            "Return shipping is free for members; other customers pay a EUR 4.95 return fee, which is deducted from the refund.",
            "Refunds go to the original payment method within 5 business days after we receive the return.",
            "Final-sale items, underwear and opened cosmetics cannot be returned.",
        ),
        (
            A(
                "multi_chunk",
                "You've got 30 days from delivery, as long as the shoes are unworn and still in their box. Returns are free if you're a member; otherwise €4.95 is taken off your refund.",
            ),
            A(
                "swapped_role",
                "You've got a month from when they arrive. Sending them back costs nothing if you're not a member; members have €4.95 knocked off their refund.",
            ),
            A(
                "swapped_number",
                "You have 14 days from delivery to return them unworn in the original box; shipping is free for members and €4.95 for everyone else.",
            ),
            A("evasive", "Return windows can vary, so I'd check your order confirmation email."),
            A(
                "faithful_paraphrase",
                "Once the parcel reaches us, the money goes back to the card or account you paid with within five business days.",
                "When will I get my refund?",
            ),
            A(
                "swapped_entity",
                "Within five business days of the return arriving, you'll receive the amount as store credit.",
                "When will I get my refund?",
            ),
        ),
    ),
    # 31
    Scenario(
        "government",
        "When do I have to file my tax return online this year?",
        (
            "The deadline for filing your 2024 income tax return online is 31 July 2025. Paper returns must be received by 30 April 2025.",
            "If you file late, a penalty of EUR 50 applies, plus EUR 10 for each additional month.",
            "Taxpayers with an annual income below EUR 12,000 are not required to file a return.",
            "Tax offices are closed on public holidays.",
        ),
        (
            A(
                "faithful_paraphrase",
                "For the 2024 tax year, online returns are due by 31 July 2025. If you're sending it on paper the deadline is earlier: it has to arrive by 30 April.",
            ),
            A(
                "swapped_date",
                "If you're doing it on the web, you need to get your 2024 return in by 30 April 2025; paper forms can arrive as late as 31 July 2025.",
            ),
            A(
                "swapped_date",
                "The online deadline for last year's return is the end of August 2025 (31 August).",
            ),
            A(
                "faithful_paraphrase",
                "No, with an income under €12,000 you don't need to file a return.",
                "Do I need to file if I only earned EUR 9,000?",
            ),
            A(
                "negation",
                "Yes. Everyone has to file whatever their income, and a late return costs €50 plus €10 for each extra month.",
                "Do I need to file if I only earned EUR 9,000?",
            ),
        ),
    ),
    # 32
    Scenario(
        "education",
        "If I drop a course in week 6, what happens?",
        (
            "Students may withdraw from a course without a grade until the end of week 4. Withdrawals in weeks 5 to 10 appear as a W on the transcript. After week 10 withdrawal is not possible.",
            "Tuition is refunded in full for withdrawals in weeks 1 and 2, and 50% for withdrawals in weeks 3 and 4.",
            "The library is open 24 hours a day during exam periods.",
        ),
        (
            A(
                "faithful_paraphrase",
                "You can still drop it in week 6, but it will show up on your transcript as a W.",
            ),
            A(
                "multi_chunk",
                "In week 3 you can withdraw without it appearing on your record, and you'd get half of your tuition back.",
                "What if I drop the course in week 3?",
            ),
            A(
                "swapped_number",
                "In week 6 you can still withdraw without anything on your transcript, as long as you do it before the end of week 8.",
            ),
            A(
                "evasive",
                "The rules differ between faculties, so please check with the registrar's office.",
            ),
        ),
    ),
    # 33
    Scenario(
        "food_safety",
        "How long can I keep leftover rice?",
        (
            "Cooked rice should be cooled within one hour and kept in the fridge. Eat it within 24 hours and reheat it only once.",
            "Reheated food must reach 75 °C in the centre.",
            "Frozen bread can be toasted without thawing.",
        ),
        (
            A(
                "faithful_paraphrase",
                "Get it into the fridge within an hour of cooking and eat it within a day. Only reheat it once.",
            ),
            A(
                "swapped_number",
                "Leftover rice keeps for up to three days in the fridge; just reheat it only once.",
            ),
            A(
                "negation",
                "You can reheat it as many times as you like, as long as the centre reaches 75 °C each time.",
            ),
        ),
    ),
    # 34
    Scenario(
        "automotive",
        "How long does fast charging take, and what's the battery warranty?",
        (
            "The vehicle supports DC fast charging at up to 150 kW. Charging from 10% to 80% takes about 30 minutes.",
            "On an 11 kW AC wallbox, a full charge takes about 8 hours.",
            "The battery warranty covers 8 years or 160,000 km, whichever comes first, and guarantees at least 70% of the original capacity.",
            "Winter tyres are recommended below 7 °C.",
        ),
        (
            A(
                "multi_chunk",
                "At a fast charger (up to 150 kW) you'll go from 10% to 80% in roughly half an hour. The battery is covered for 8 years or 160,000 km, whichever you reach first, with at least 70% of its capacity guaranteed.",
            ),
            A(
                "swapped_number",
                "Topping up from 10 to 80 percent on a rapid charger takes around half an hour. The battery is guaranteed for 8 years or 100,000 km, whichever comes sooner, and should keep at least 70% of its capacity.",
            ),
            A(
                "added_claim",
                "About 30 minutes from 10% to 80% on a fast charger. The battery is covered for 8 years or 160,000 km, and the warranty transfers to the next owner if you sell the car.",
            ),
            A(
                "faithful_paraphrase",
                "About eight hours for a full charge.",
                "How long does a full charge take on my 11 kW wallbox?",
            ),
        ),
    ),
    # 35
    Scenario(
        "medicine",
        "How much paracetamol syrup can I give my 7-year-old?",
        (
            "Children aged 6 to 8 years: give 5 ml (240 mg) every four to six hours. Do not give more than four doses in 24 hours.",
            "Children aged 8 to 10 years: give 7.5 ml (360 mg) every four to six hours. Do not give more than four doses in 24 hours.",
            "Do not give to children under 6 years without advice from a doctor.",
            "Shake the bottle well before use.",
        ),
        (
            A(
                "faithful_paraphrase",
                "For a seven-year-old the dose is 5 ml, which is 240 mg, with at least four hours between doses and no more than four doses in a day.",
            ),
            A(
                "swapped_number",
                "A seven-year-old can have 7.5 ml (that's 360 mg) at a time, leaving four to six hours in between, and at most four doses in a day.",
            ),
            A(
                "evasive",
                "I'd really recommend checking with a pharmacist before giving any medicine to a child.",
            ),
        ),
    ),
    # 36
    Scenario(
        "it_helpdesk",
        "Can I install Figma on my laptop?",
        (
            "Standard software (Office, Zoom, Slack) can be installed yourself from the Software Center.",
            "Other software must be requested through a ticket. The security team reviews requests within three business days.",
            "Administrator rights are granted only to IT staff.",
            "Meeting rooms can be booked in the calendar app.",
        ),
        (
            A(
                "faithful_paraphrase",
                "Figma isn't on the standard list, so you'll need to raise a ticket for it. The security team looks at these requests, normally within three working days.",
            ),
            A(
                "negation",
                "Sure, you can install it yourself: just ask IT to give your account administrator rights first.",
            ),
            A(
                "swapped_number",
                "You'll need to open a ticket; the security team reviews software requests within five business days.",
            ),
            A(
                "swapped_entity",
                "You'll have to ask for it via a ticket; purchasing looks at these requests and usually answers within three working days.",
            ),
        ),
    ),
    # 37
    Scenario(
        "hr_policy",
        "What are the rules for working from abroad?",
        (
            "Working from another country requires approval from the People team and is limited to 20 working days per calendar year.",
            "Employees must be reachable during core hours, 10:00 to 16:00 CET.",
            "The company matches charity donations up to EUR 200 a year.",
        ),
        (
            A(
                "multi_chunk",
                "You can work from another country for up to 20 working days a year, once the People team has approved it, and you still need to be reachable during core hours, 10:00 to 16:00 CET.",
            ),
            A(
                "swapped_date",
                "You can work abroad for up to 20 working days a year with the People team's approval, and you must be reachable from 9:00 to 17:00 CET.",
            ),
            A(
                "swapped_entity",
                "Working from another country is allowed for up to 20 working days a year, as long as your line manager approves it.",
            ),
            A(
                "faithful_paraphrase",
                "Probably not for the whole month: working abroad is capped at 20 working days a year, and you'd need the People team's approval before you go.",
                "Can I work from Spain for a month?",
            ),
        ),
    ),
    # 38
    Scenario(
        "science",
        "What do insulin and glucagon do?",
        (
            "Insulin, produced by the beta cells of the pancreas, lowers blood glucose by helping cells take it up. Glucagon, produced by the alpha cells, raises blood glucose by making the liver release stored glucose.",
            "Type 1 diabetes results from the autoimmune destruction of beta cells.",
            "The pancreas also produces digestive enzymes such as amylase and lipase.",
        ),
        (
            A(
                "faithful_paraphrase",
                "They work in opposite directions. Insulin, made by the pancreas's beta cells, brings blood sugar down by letting cells absorb glucose; glucagon, from the alpha cells, pushes it back up by getting the liver to release its stores.",
            ),
            A(
                "swapped_role",
                "They pull in opposite directions: glucagon, which the beta cells make, brings sugar levels down, and insulin, from the alpha cells, pushes them up by getting the liver to release its stores.",
            ),
            A(
                "multi_chunk",
                "Type 1 diabetes happens when the immune system destroys the beta cells, and those are the cells that make insulin, the hormone that lowers blood sugar.",
                "Why does type 1 diabetes affect blood sugar?",
            ),
            A(
                "added_claim",
                "Insulin, made by beta cells, brings blood sugar down, and glucagon, from alpha cells, raises it again via the liver. Both hormones are secreted mostly overnight, during sleep.",
            ),
        ),
    ),
    # 39
    Scenario(
        "legal_terms",
        "When does the risk pass to us for goods we buy?",
        (
            "Delivery terms. Risk of loss passes from the Seller to the Buyer when the goods are handed to the first carrier at the Seller's warehouse.",
            "Title to the goods passes to the Buyer only on full payment of the invoice.",
            "Invoices are payable within 30 days.",
        ),
        (
            A(
                "faithful_paraphrase",
                "As the buyer, you carry the risk as soon as the goods are handed to the first carrier at the seller's warehouse.",
            ),
            A(
                "swapped_role",
                "The seller keeps the risk until the goods reach you; you only take it on once the carrier hands them over at your premises.",
            ),
            A(
                "multi_chunk",
                "Risk moves to you when the seller hands the goods to the first carrier at its warehouse, but you only become the owner once the invoice has been paid in full.",
                "When do we own the goods, and who bears the risk in transit?",
            ),
            A(
                "negation",
                "You become the owner of the goods as soon as they leave the seller's warehouse, whether or not the invoice has been paid.",
                "When do we become the owner of the goods?",
            ),
        ),
    ),
    # 40
    Scenario(
        "finance",
        "Can I get my money back from a direct debit I didn't expect?",
        (
            "SEPA direct debit. The creditor initiates the collection using a mandate signed by the debtor.",
            "The debtor can ask their bank for a refund of an authorised direct debit within eight weeks of the debit date, without giving a reason.",
            "For an unauthorised debit, a refund can be requested within 13 months.",
            "Standing orders are set up by the account holder.",
        ),
        (
            A(
                "multi_chunk",
                "Yes. If you'd signed a mandate for it, you can ask your bank for a refund within eight weeks of the debit, no reason needed. If you never authorised it, you have up to 13 months.",
            ),
            A(
                "swapped_role",
                "The company that collects the money can request a refund within eight weeks; you as the payer can only ask them to reverse it.",
            ),
            A(
                "swapped_number",
                "For an authorised debit you have six weeks to request a refund from your bank; an unauthorised one can be disputed within 13 months.",
            ),
            A("evasive", "I don't have that information."),
        ),
    ),
    # 41
    Scenario(
        "hr_policy",
        "Who makes the final hiring decision after interviews?",
        (
            "Hiring process. Each interviewer submits a written scorecard within 24 hours of the interview. The hiring manager makes the final decision after reviewing all scorecards.",
            "Offers above the salary band require approval from the compensation committee.",
            "Referral bonuses are paid after the new hire completes three months.",
        ),
        (
            A(
                "faithful_paraphrase",
                "The hiring manager decides, once they've gone through the scorecards every interviewer has handed in.",
            ),
            A(
                "swapped_role",
                "The interview panel makes the final call, and the hiring manager writes up a scorecard within 24 hours to support it.",
            ),
            A(
                "swapped_number",
                "Everyone on the panel has two days (48 hours) to hand in their written feedback; after that the hiring manager decides.",
            ),
            A(
                "added_claim",
                "The hiring manager makes the decision after reading every scorecard. Candidates can then appeal a rejection to the recruiting team within a week.",
            ),
        ),
    ),
    # 42
    Scenario(
        "travel",
        "When does the ferry to the island run?",
        (
            "The ferry to Skerra Island runs daily from 1 May to 30 September, departing the harbour at 08:15, 12:30 and 17:45.",
            "Outside the season there is one crossing on Saturdays at 10:00.",
            "Bicycles travel free; cars must be booked in advance.",
        ),
        (
            A(
                "multi_chunk",
                "In season, from 1 May until 30 September, there are three crossings a day, at 08:15, 12:30 and 17:45. The rest of the year there's only a single Saturday sailing at 10:00.",
            ),
            A(
                "swapped_date",
                "The ferry runs every day from 1 June to 30 September, with departures at 08:15, 12:30 and 17:45.",
            ),
            A(
                "swapped_date",
                "Between May and September it leaves three times a day: 08:15, 12:30 and 18:45.",
            ),
            A(
                "swapped_date",
                "Out of season there's one crossing a week, on Sundays at 10:00.",
                "Is there a ferry in winter?",
            ),
            A(
                "added_claim",
                "It runs daily from May to the end of September (08:15, 12:30 and 17:45). Tickets are half price for children under 12.",
            ),
        ),
    ),
    # 43
    Scenario(
        "product_docs",
        "How long is version 3 of the SDK supported?",
        (
            "Support policy. SDK version 3.x receives security fixes until 31 March 2026. Version 4.x, released on 15 January 2025, is the current major version.",
            "Deprecated methods are removed in the next major version.",
            "The SDK is available under the Apache 2.0 licence.",
        ),
        (
            A(
                "faithful_paraphrase",
                "Version 3 keeps getting security fixes until the end of March 2026; the current major release is 4, which came out in January 2025.",
            ),
            A(
                "swapped_date",
                "SDK 3.x will receive security fixes until 31 March 2027, so there's no rush to move to 4.x.",
            ),
            A(
                "swapped_date",
                "Version 3 stops getting security patches at the end of March 2026. The newer major release, 4, has been out since 15 June 2025.",
            ),
            A(
                "swapped_entity",
                "Version 3 keeps receiving security patches until the end of March 2026. The SDK itself is open source under the MIT licence.",
            ),
        ),
    ),
    # 44
    Scenario(
        "legal_terms",
        "When do the new terms of service take effect?",
        (
            "Changes to these Terms. The updated Terms take effect on 1 October 2025. If you continue to use the Service after that date, you accept the updated Terms.",
            "You may close your account at any time from the account settings page.",
            "Notices to us must be sent to legal@provider.example.",
        ),
        (
            A(
                "faithful_paraphrase",
                "They apply from 1 October 2025. Carrying on using the service after that date counts as accepting them.",
            ),
            A(
                "swapped_date",
                "The updated terms come into force on 1 November 2025; using the service after that means you accept them.",
            ),
            A(
                "negation",
                "They start on 1 October 2025, but you'll be asked to accept them explicitly; just continuing to use the service doesn't count as agreeing.",
            ),
            A(
                "evasive",
                "I'm not able to interpret legal terms for you. Please contact our legal team if you have questions.",
            ),
        ),
    ),
    # 45
    Scenario(
        "hr_policy",
        "When is open enrolment for benefits?",
        (
            "Benefits open enrolment runs from 3 November to 21 November. Changes take effect on 1 January.",
            "Outside open enrolment, changes are only possible after a qualifying life event such as marriage or the birth of a child.",
            "Gym membership is reimbursed up to EUR 40 a month.",
        ),
        (
            A(
                "multi_chunk",
                "You can make changes between 3 and 21 November, and they apply from 1 January. Outside that window you'd need a qualifying life event, like getting married or having a baby.",
            ),
            A(
                "swapped_date",
                "The window to pick or change benefits runs 3–21 October, and whatever you choose applies from New Year's Day.",
            ),
            A(
                "swapped_date",
                "You can make your choices between 3 and 21 November; they start applying on 1 December.",
            ),
            A(
                "negation",
                "Outside open enrolment you can change your benefits at any time; the November window is just the usual moment.",
                "Can I change my benefits in March?",
            ),
        ),
    ),
    # 46
    Scenario(
        "travel",
        "Which airport do flights to the conference leave from?",
        (
            "Conference travel. The group flight on 12 June leaves from Dublin Airport at 07:40 and arrives in Lisbon at 11:05 local time.",
            "The return flight on 15 June departs Lisbon at 18:20.",
            "Hotel rooms are booked at the Marquês Plaza for three nights.",
        ),
        (
            A(
                "faithful_paraphrase",
                "The group flight goes from Dublin Airport, leaving at 07:40 on 12 June and landing in Lisbon at 11:05 local time.",
            ),
            A(
                "swapped_entity",
                "You'll fly out of Amsterdam Schiphol at 07:40 on 12 June, arriving in Lisbon at 11:05.",
            ),
            A(
                "swapped_date",
                "Everyone flies out together from Dublin at 7:40 a.m. on 13 June, landing in Lisbon just after 11 local time (11:05).",
            ),
            A(
                "multi_chunk",
                "You're away three nights: out on 12 June (Dublin 07:40, Lisbon 11:05 local), staying at the Marquês Plaza, and back on 15 June on the 18:20 from Lisbon.",
                "What's the full travel plan?",
            ),
        ),
    ),
    # 47
    Scenario(
        "product_docs",
        "Where are backups stored?",
        (
            "Backups. Nightly backups are written to Amazon S3 in the customer's region and kept for 35 days.",
            "Point-in-time recovery is available for the last 7 days on the Business plan.",
            "Audit logs can be exported as CSV.",
        ),
        (
            A(
                "faithful_paraphrase",
                "Every night a backup goes to Amazon S3, in the same region as your account, and each one is kept for 35 days.",
            ),
            A(
                "swapped_entity",
                "Nightly backups are stored in Google Drive in your region and retained for 35 days.",
            ),
            A(
                "swapped_number",
                "Each night a copy of your data goes to Amazon S3 in your own region, and each copy is kept for a month (30 days).",
            ),
            A(
                "multi_chunk",
                "There are two safety nets. Nightly backups go to S3 in your region and stay there for 35 days, and on the Business plan you can also do point-in-time recovery to any moment in the last week.",
                "How far back can I restore data?",
            ),
            A(
                "added_claim",
                "Nightly to Amazon S3 in your region, kept for 35 days. The backups are encrypted with a key that only you hold.",
            ),
        ),
    ),
    # 48
    Scenario(
        "medicine",
        "How should I store the insulin pens?",
        (
            "Storage. Keep unopened pens in a refrigerator at 2 °C to 8 °C. Do not freeze.",
            "Once in use, a pen can be kept at room temperature below 30 °C for up to 28 days.",
            "Always use a new needle for each injection.",
        ),
        (
            A(
                "multi_chunk",
                "Unopened pens belong in the fridge at 2–8 °C, never in the freezer. The one you're using can stay at room temperature, under 30 °C, for up to 28 days.",
            ),
            A(
                "swapped_number",
                "After first use, the pen is fine out of the fridge, as long as it stays under 30 °C, for as long as 42 days.",
            ),
            A(
                "negation",
                "You can keep unopened pens in the freezer to make them last longer, and in-use pens at room temperature for up to 28 days.",
            ),
            A("evasive", "Storage can depend on the brand, so please ask your pharmacist."),
        ),
    ),
    # 49
    Scenario(
        "science",
        "What did the study find about the new drought-tolerant wheat?",
        (
            "In field trials across three seasons, the drought-tolerant wheat line yielded 18% more grain than the standard variety under water stress.",
            "Under normal irrigation there was no significant difference in yield between the two lines.",
            "The trials were run by the University of Adelaide in South Australia.",
        ),
        (
            A(
                "multi_chunk",
                "Across three seasons of field trials in South Australia, run by the University of Adelaide, the new line produced about 18% more grain than the standard variety when water was short, but with normal irrigation the two did about the same.",
            ),
            A(
                "swapped_number",
                "Under drought stress the new line gave 28% more grain than the standard variety; with normal irrigation the yields were similar.",
            ),
            A(
                "negation",
                "When water was scarce it gave 18% more grain than the usual variety, and even with regular watering it clearly beat it.",
            ),
            A(
                "swapped_entity",
                "Researchers at the University of Melbourne tested it in the field for three years and saw roughly 18% higher yields when the crop was short of water.",
            ),
            A(
                "added_claim",
                "It yielded 18% more grain under water stress and the same under normal irrigation. The line is expected to reach farmers within two years.",
            ),
        ),
    ),
    # 50
    Scenario(
        "ecommerce",
        "Can I change the delivery address after ordering?",
        (
            "Orders can be changed or cancelled until they are packed, usually within 2 hours of ordering. After that, contact the courier through the tracking link.",
            "Standard delivery takes 2 to 4 business days; express delivery arrives the next business day if ordered before 14:00.",
            "Gift wrapping is available for EUR 3.",
        ),
        (
            A(
                "faithful_paraphrase",
                "You can, as long as the order hasn't been packed yet, which normally happens within two hours. After that, you'd have to arrange it with the courier using the tracking link.",
            ),
            A(
                "swapped_number",
                "Address changes are possible for up to 24 hours after ordering; after that, use the courier's tracking link.",
            ),
            A(
                "swapped_date",
                "Order express by 4 p.m. and it's with you the following working day; the regular option takes two to four working days.",
                "How fast is delivery?",
            ),
            A(
                "faithful_paraphrase",
                "Standard shipping takes two to four working days. If you order express before 2 p.m., it arrives the next working day.",
                "How fast is delivery?",
            ),
            A(
                "evasive",
                "I'm not sure whether that's possible for your order. Customer service should be able to help.",
            ),
        ),
    ),
)


def records() -> list[dict[str, object]]:
    """Every answer as a record, with its split."""
    rows: list[tuple[int, dict[str, object]]] = []
    n = 0
    for index, scenario in enumerate(SCENARIOS):
        for answer in scenario.answers:
            if answer.category not in CATEGORIES:
                raise ValueError(f"scenario {index + 1}: unknown category {answer.category!r}")
            n += 1
            rows.append(
                (
                    index,
                    {
                        "id": f"realistic-{n:03d}",
                        "user_input": answer.question or scenario.question,
                        "retrieved_contexts": list(scenario.contexts),
                        "response": answer.response,
                        "label_hallucinated": answer.category not in FAITHFUL,
                        "category": answer.category,
                        "domain": scenario.domain,
                    },
                )
            )
    holdout = _holdout_scenarios()
    out = []
    for index, row in rows:
        row["split"] = "holdout" if index in holdout else "tune"
        out.append(row)
    return out


def _holdout_scenarios() -> set[int]:
    """Scenarios shuffled with SEED, taken while no category goes over its 40 %."""
    total = Counter(a.category for s in SCENARIOS for a in s.answers)
    cap = {c: HOLDOUT_SHARE * n for c, n in total.items()}
    taken: Counter[str] = Counter()
    order = list(range(len(SCENARIOS)))
    random.Random(SEED).shuffle(order)
    holdout = set()
    for index in order:
        counts = Counter(a.category for a in SCENARIOS[index].answers)
        if all(taken[c] + k <= cap[c] + 0.5 for c, k in counts.items()):
            holdout.add(index)
            taken.update(counts)
    return holdout


def render() -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail when the file is out of date")
    args = parser.parse_args()
    text = render()
    if args.check:
        if OUT.read_text(encoding="utf-8") != text:
            print(f"{OUT} is out of date: run bench/data/make_realistic.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text, encoding="utf-8")
    counts = Counter((r["category"], r["split"]) for r in records())
    print(f"{'category':<22}{'tune':>6}{'holdout':>9}")
    for c in CATEGORIES:
        print(f"{c:<22}{counts[c, 'tune']:>6}{counts[c, 'holdout']:>9}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
