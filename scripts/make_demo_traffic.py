#!/usr/bin/env python3
"""Generate monitor/demo/traffic.jsonl, the traffic set of `rag-monitor demo`.

Deterministic (fixed seed, no clock, no network): running it twice writes the
same bytes. Everything is invented here: a small knowledge base of an
imaginary company's HR policies, IT helpdesk articles, billing terms and
product documentation, and templates that turn it into RAG interactions in the
record schema (docs/design.md, "The record"), each with a known label:

- ``faithful``      the answer restates the retrieved policy correctly, in its own
                    words as an LLM answers (paraphrase, not copied sentences);
- ``hallucinated``  the answer gets it wrong: one swapped amount, date, name or
                    product in an otherwise faithful answer, two parties' roles
                    exchanged (who gets what), every detail swapped, or an extra
                    claim found in no document;
- ``off_topic``     the answer is about something else (the retriever fetched
                    the wrong document and the model followed it, or the model
                    drifted to another topic);
- ``evasive``       the answer is noncommittal ("I don't know", "it depends").

``metadata.noisy_retrieval`` marks records whose contexts mix irrelevant
chunks in with the relevant one. Every record carries the reference answer
(``reference``) so the demo can annotate its backlog and run the offline
metrics. No PII except a few deliberate, fictitious e-mail addresses
(``example.com``) and phone numbers (the 555-01xx range) in questions, so
the demo shows redaction.

Usage: ``python3 scripts/make_demo_traffic.py [--out FILE] [--count N] [--seed S]``.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import uuid
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

SEED = 20261129
COUNT = 300
OUT = Path(__file__).resolve().parent.parent / "monitor" / "demo" / "traffic.jsonl"

#: labels in each block of 20 records (shuffled inside the block): any prefix of
#: 20·k records has exactly these proportions, so `--records 40` is still mixed.
BLOCK = ["faithful"] * 11 + ["hallucinated"] * 4 + ["off_topic"] * 2 + ["evasive"] * 3
NOISY_SHARE = 0.3

ROUTES = ("hr-policy", "it-helpdesk", "billing", "product-docs")
#: which team an evasive answer sends people to
TEAMS = {
    "hr-policy": "the People team",
    "it-helpdesk": "the IT service desk",
    "billing": "the billing team",
    "product-docs": "support",
}
MODELS = (("gpt-4o-mini-2024-07-18", 0.6), ("llama-3.1-8b-instruct", 0.4))
TENANTS = ("kestrel-internal", "tenant-eu-01", "tenant-us-02", "tenant-us-07")


@dataclass(frozen=True)
class Fact:
    """One policy or article: its chunks, how people ask about it, and answers."""

    route: str
    doc: str
    chunks: tuple[str, ...]
    questions: tuple[str, ...]
    reference: str
    answers: tuple[str, ...]
    #: (true detail, invented detail): applied to an answer to make it hallucinated
    swaps: tuple[tuple[str, str], ...]
    #: a plausible claim found in no document
    invented: tuple[str, ...]
    #: two parties or slots of one answer whose roles can be exchanged ("primary" and
    #: "secondary" caregivers, "event data" and "audit logs"): who gets what, swapped
    exchanges: tuple[tuple[str, str], ...] = ()


KB: tuple[Fact, ...] = (
    # ------------------------------------------------------------------ hr-policy
    Fact(
        "hr-policy",
        "hr/annual-leave",
        (
            "Annual leave. Full-time employees receive 25 days of paid annual leave per "
            "calendar year. Part-time employees receive leave pro rata to their contracted hours.",
            "Carry-over. Up to 5 unused leave days can be carried over into the next year. "
            "Carried-over days must be taken by March 31, after which they expire.",
        ),
        (
            "How many vacation days do I get per year?",
            "What is the annual leave allowance for full-time staff?",
            "Can I carry unused vacation days into next year?",
        ),
        "Full-time employees get 25 days of paid annual leave per year; up to 5 unused days "
        "can be carried over and must be used by March 31.",
        (
            "Full-timers get 25 paid holiday days each calendar year. If you don't use them all, "
            "up to five can move into the next year, but those have to be taken before the end of "
            "March or they're lost.",
            "Your entitlement is 25 days of paid leave a year. Any you haven't used? You can bring "
            "up to 5 of them forward, as long as you take them by 31 March.",
        ),
        (
            ("25", "30"),
            ("up to five", "up to ten"),
            ("up to 5", "up to 10"),
            ("end of March", "end of June"),
            ("31 March", "30 June"),
        ),
        (
            "Unused days beyond the carry-over limit are paid out in the December payroll.",
            "Employees with more than five years of service get 3 extra days.",
        ),
    ),
    Fact(
        "hr-policy",
        "hr/parental-leave",
        (
            "Parental leave. Primary caregivers receive 16 weeks of fully paid parental leave. "
            "Secondary caregivers receive 6 weeks of fully paid leave.",
            "Eligibility. Parental leave is available to employees who have completed 6 months "
            "of employment. Leave must start within 12 months of the birth or adoption.",
        ),
        (
            "How long is paid parental leave?",
            "How much parental leave does a secondary caregiver get?",
            "When am I eligible for parental leave?",
        ),
        "Primary caregivers get 16 weeks and secondary caregivers 6 weeks of fully paid "
        "parental leave, after 6 months of employment.",
        (
            "If you're the primary caregiver you get 16 weeks off on full pay; secondary "
            "caregivers get 6 weeks, also fully paid. You qualify once you've been with the "
            "company for six months.",
            "Primary caregivers are entitled to 16 fully paid weeks and secondary caregivers to 6. "
            "To be eligible you need at least six months of service.",
        ),
        (("16", "20"), ("6 weeks", "8 weeks"), ("to 6.", "to 8."), ("six months", "three months")),
        (
            "Parental leave can also be taken as a four-day week for up to a year.",
            "Fathers get an additional 2 weeks of paternity leave on top of this.",
        ),
        exchanges=(("primary", "secondary"),),
    ),
    Fact(
        "hr-policy",
        "hr/remote-work",
        (
            "Remote work. Employees may work remotely up to 3 days per week with their manager's "
            "approval. Core collaboration hours are 10:00 to 15:00 local time.",
            "Working abroad. Working from another country requires approval from the People team "
            "and is limited to 20 working days per year.",
        ),
        (
            "How many days a week can I work from home?",
            "What are the core hours when working remotely?",
            "Can I work from another country for a few weeks?",
        ),
        "Up to 3 remote days per week with manager approval; core hours are 10:00 to 15:00; "
        "working abroad needs People team approval and is limited to 20 working days a year.",
        (
            "With your manager's OK you can work from home for as many as three days a week. On "
            "your remote days, be available during the core window of 10:00 to 15:00 local time.",
            "Home working is fine for up to three days weekly if your manager signs off. Working "
            "from another country is a separate matter: the People team has to approve it, and "
            "it's capped at 20 working days per year.",
        ),
        (
            ("three days", "four days"),
            ("10:00 to 15:00", "9:00 to 17:00"),
            ("20 working days", "45 working days"),
        ),
        (
            "Remote days must be booked in the Deskly app by Sunday evening.",
            "Employees who work fully remote receive a relocation allowance.",
        ),
        exchanges=(("your manager", "the People team"),),
    ),
    Fact(
        "hr-policy",
        "hr/travel-expenses",
        (
            "Receipts. A receipt is required for any travel expense over $75. Meals are "
            "reimbursed up to $60 per day while travelling.",
            "Submitting claims. Expense claims are submitted in the Expensa portal within 30 "
            "days of the trip. Late claims need approval from your department head.",
        ),
        (
            "When do I need to attach a receipt for travel expenses?",
            "What is the daily meal allowance when travelling?",
            "How long do I have to submit an expense claim?",
        ),
        "Receipts are required for travel expenses over $75, meals are reimbursed up to $60 per "
        "day, and claims go through Expensa within 30 days of the trip.",
        (
            "Keep a receipt for anything over $75 you spend on a trip; meals are covered up to $60 "
            "a day. File the claim in Expensa no later than 30 days after the trip.",
            "A receipt is needed whenever a travel expense goes above $75. Claims go into the "
            "Expensa portal, at most 30 days after you travelled.",
        ),
        (("$75", "$25"), ("$60", "$90"), ("Expensa", "Concur"), ("30 days", "90 days")),
        (
            "Lodging is only reimbursed for trips of three nights or more.",
            "Alcohol is reimbursed when you are entertaining a client.",
        ),
    ),
    Fact(
        "hr-policy",
        "hr/sick-leave",
        (
            "Sick leave. Employees receive 10 days of paid sick leave per year. A doctor's note "
            "is required after 3 consecutive days of absence.",
            "Reporting sickness. Tell your manager before 10:00 on the first day of absence and "
            "record the absence in the HR portal.",
        ),
        (
            "How many paid sick days do we get?",
            "When do I need a doctor's note for sick leave?",
            "How do I report that I'm sick?",
        ),
        "10 paid sick days per year; a doctor's note is needed after 3 consecutive days; tell "
        "your manager before 10:00 and record it in the HR portal.",
        (
            "You have 10 paid sick days a year. Once you've been off three days in a row, you'll "
            "need a note from your doctor.",
            "Let your manager know before 10:00 on your first sick day, and log the absence in the "
            "HR portal. From three consecutive days off, a doctor's note is needed.",
        ),
        (
            ("10 paid", "15 paid"),
            ("three days", "five days"),
            ("three consecutive", "five consecutive"),
            ("10:00", "12:00"),
        ),
        (
            "Unused sick days are converted into annual leave at the end of the year.",
            "Sick leave during probation is unpaid.",
        ),
    ),
    Fact(
        "hr-policy",
        "hr/learning-budget",
        (
            "Learning budget. Every employee has a learning budget of $1,500 per year for "
            "courses, books and conferences. Spending requires your manager's approval.",
            "The learning budget does not roll over: unused budget expires on December 31.",
        ),
        (
            "How big is the learning and development budget?",
            "Does the unused training budget roll over?",
        ),
        "$1,500 per employee per year for courses, books and conferences, with manager approval; "
        "unused budget expires on December 31.",
        (
            "Everyone gets $1,500 a year to spend on learning, whether that's courses, books or "
            "conferences, as long as your manager approves the spend.",
            "No, it doesn't carry over. The $1,500 yearly learning budget has to be used by "
            "December 31; whatever is left then expires.",
        ),
        (("$1,500", "$3,000"), ("December 31", "January 31")),
        (
            "Certifications are reimbursed separately and do not count against the budget.",
            "Half of any unused budget rolls over into the next year.",
        ),
    ),
    Fact(
        "hr-policy",
        "hr/probation-notice",
        (
            "Probation. New employees serve a probation period of 90 days. During probation the "
            "notice period is 1 week for either side.",
            "Notice periods. After probation the notice period is 4 weeks, or 8 weeks for people "
            "managers.",
        ),
        (
            "How long is the probation period?",
            "What is the notice period after probation?",
        ),
        "Probation lasts 90 days with 1 week notice; afterwards notice is 4 weeks, 8 weeks for "
        "people managers.",
        (
            "The probation period is 90 days. While you're in it, either side can end things with "
            "a week's notice; once it's over, notice goes up to four weeks.",
            "Once you're past the 90-day probation, you'd give four weeks' notice, or eight weeks "
            "if you manage people.",
        ),
        (
            ("90 days", "6 months"),
            ("90-day", "six-month"),
            ("four weeks", "three months"),
            ("eight weeks", "twelve weeks"),
            ("a week's notice", "two weeks' notice"),
        ),
        (
            "Probation can be extended once by 30 days.",
            "Employees on probation cannot take annual leave.",
        ),
    ),
    Fact(
        "hr-policy",
        "hr/referral-bonus",
        (
            "Referral bonus. Employees who refer a candidate who is hired receive a bonus of "
            "$2,000. The bonus is paid after the new hire completes 90 days.",
        ),
        (
            "How much is the employee referral bonus?",
            "When is the referral bonus paid out?",
        ),
        "$2,000 per hired referral, paid after the new hire completes 90 days.",
        (
            "It's $2,000 for each referral who gets hired, paid out once they've been with us for "
            "90 days.",
            "You'll receive $2,000 when someone you referred is hired, but only after they've "
            "completed their first 90 days.",
        ),
        (("$2,000", "$5,000"), ("90 days", "30 days")),
        (
            "Referrals for engineering roles earn double the bonus.",
            "The bonus is paid as company shares rather than cash.",
        ),
    ),
    Fact(
        "hr-policy",
        "hr/home-office",
        (
            "Home office. New employees receive a one-time stipend of $500 for home office "
            "equipment. An internet allowance of $40 per month is paid with the salary.",
        ),
        (
            "Is there a stipend for home office equipment?",
            "Do we get an internet allowance?",
        ),
        "A one-time $500 home office stipend and a $40 monthly internet allowance paid with the "
        "salary.",
        (
            "Yes! New starters get a one-off $500 to set up their home office, plus $40 a month "
            "towards internet.",
            "There's a single $500 payment for home office equipment, and an internet allowance of "
            "$40 per month that comes with your salary.",
        ),
        (("$500", "$1,200"), ("$40", "$75")),
        (
            "The stipend is renewed every two years.",
            "Office chairs must be bought from the approved vendor ErgoPlus.",
        ),
        exchanges=(("$500", "$40"),),
    ),
    Fact(
        "hr-policy",
        "hr/performance-reviews",
        (
            "Performance reviews take place twice a year, in April and October. Calibration "
            "sessions are facilitated by the People team.",
        ),
        (
            "When are performance reviews?",
            "How often do we have performance reviews?",
        ),
        "Twice a year, in April and October, with calibration facilitated by the People team.",
        (
            "Reviews come round twice a year: once in April and once in October.",
            "They're held in April and October, with the People team running the calibration "
            "sessions.",
        ),
        (("April", "January"), ("October", "July"), ("twice a year", "once a year")),
        (
            "Salary increases are announced two weeks after each review.",
            "Every review includes a 360-degree survey of five peers.",
        ),
    ),
    # ---------------------------------------------------------------- it-helpdesk
    Fact(
        "it-helpdesk",
        "it/password-reset",
        (
            "Password reset. Reset your password yourself at id.kestrel.example/reset. Passwords "
            "must be at least 14 characters long and are rotated every 180 days.",
            "Lockout. After 5 failed sign-in attempts the account is locked for 15 minutes.",
        ),
        (
            "How do I reset my password?",
            "How long does a password have to be?",
            "My account is locked after too many attempts, how long do I wait?",
        ),
        "Reset it at id.kestrel.example/reset; passwords need 14+ characters and rotate every "
        "180 days; after 5 failed attempts the account locks for 15 minutes.",
        (
            "You can do it yourself at id.kestrel.example/reset. The new password needs at least "
            "14 characters, and you'll be asked to change it every 180 days.",
            "After five failed sign-ins the account is locked for 15 minutes, so you'll have to "
            "wait that out, or reset the password yourself at id.kestrel.example/reset.",
        ),
        (
            ("14 characters", "8 characters"),
            ("180 days", "90 days"),
            ("15 minutes", "24 hours"),
            ("five failed", "three failed"),
        ),
        (
            "The IT desk can reset it over the phone if you give your employee number.",
            "Passwords cannot reuse any of the last 24 passwords.",
        ),
    ),
    Fact(
        "it-helpdesk",
        "it/vpn",
        (
            "VPN. Use the GlobalGate client and connect to the vpn-eu or vpn-us gateway. "
            "Multi-factor authentication is required on every connection.",
            "VPN sessions last 12 hours, after which you have to sign in again.",
        ),
        (
            "How do I connect to the VPN?",
            "How long does a VPN session last?",
        ),
        "Use the GlobalGate client with the vpn-eu or vpn-us gateway and MFA; sessions last 12 "
        "hours.",
        (
            "Install the GlobalGate client and pick either the vpn-eu or the vpn-us gateway. Every "
            "connection needs multi-factor authentication.",
            "A VPN session is good for 12 hours; after that you sign in again. You connect through "
            "GlobalGate, with MFA each time.",
        ),
        (
            ("GlobalGate", "Cisco AnyConnect"),
            ("12 hours", "8 hours"),
            ("either the vpn-eu or the vpn-us gateway", "the vpn-global gateway"),
        ),
        (
            "The VPN is not needed for email on mobile phones.",
            "Split tunnelling is enabled for video calls.",
        ),
    ),
    Fact(
        "it-helpdesk",
        "it/laptops",
        (
            "Laptops are refreshed every 3 years. A broken laptop is replaced within 2 business "
            "days: open a ticket in the Hardware category.",
        ),
        (
            "My laptop is broken, how fast can I get a replacement?",
            "How often are laptops replaced?",
        ),
        "Laptops are refreshed every 3 years; broken ones are replaced within 2 business days "
        "via a Hardware ticket.",
        (
            "Raise a ticket under the Hardware category and you'll have a replacement within 2 "
            "business days.",
            "Machines are swapped for new ones every three years, and if yours breaks in between, "
            "a replacement arrives within two business days.",
        ),
        (
            ("2 business days", "10 business days"),
            ("two business days", "ten business days"),
            ("Hardware", "Facilities"),
            ("three years", "five years"),
        ),
        (
            "You can keep your old laptop for $200 after a refresh.",
            "MacBooks are only available to engineering staff.",
        ),
    ),
    Fact(
        "it-helpdesk",
        "it/mfa",
        (
            "Multi-factor authentication. An authenticator app is required for all accounts. "
            "Hardware security keys (YubiKey) are available from IT on request. SMS codes are "
            "not allowed.",
        ),
        (
            "Can I use SMS codes for two-factor authentication?",
            "Which MFA methods are allowed?",
        ),
        "An authenticator app is required; YubiKey hardware keys are available from IT; SMS "
        "codes are not allowed.",
        (
            "No, SMS codes aren't permitted. You'll need an authenticator app, or you can ask IT "
            "for a YubiKey security key.",
            "Every account has to use an authenticator app. If you'd like a physical key, IT can "
            "give you a YubiKey on request.",
        ),
        (
            ("No, SMS codes aren't permitted", "Yes, SMS codes are accepted"),
            ("YubiKey security key", "Titan security key"),
            ("a YubiKey on", "a Titan key on"),
        ),
        (
            "Biometric login counts as a second factor on company phones.",
            "MFA can be skipped when you are in the office network.",
        ),
    ),
    Fact(
        "it-helpdesk",
        "it/software",
        (
            "Software installation. Request software through the Software Center. Local admin "
            "rights are not granted. Requests for paid licenses take up to 5 business days.",
        ),
        (
            "How do I install new software on my laptop?",
            "How long does a software license request take?",
        ),
        "Through the Software Center; no local admin rights; paid licenses take up to 5 "
        "business days.",
        (
            "Go through the Software Center to request it; you won't be given local admin rights.",
            "If it needs a paid license, expect it to take up to five business days via the "
            "Software Center.",
        ),
        (
            ("won't be given", "can ask for"),
            ("five business days", "24 hours"),
            ("Software Center", "IT Store"),
        ),
        (
            "Developers can request temporary admin rights for 48 hours.",
            "Open-source software does not need a request.",
        ),
    ),
    Fact(
        "it-helpdesk",
        "it/mailbox",
        (
            "Mailbox. The mailbox quota is 50 GB. Email older than 2 years is moved to the online "
            "archive automatically.",
        ),
        (
            "What is the mailbox size limit?",
            "Where do my old emails go?",
        ),
        "The quota is 50 GB; email older than 2 years moves to the online archive automatically.",
        (
            "Your mailbox can hold 50 GB. Anything older than two years is moved into the online "
            "archive automatically.",
            "Mail that's more than two years old ends up in the online archive on its own; the "
            "mailbox itself is capped at 50 GB.",
        ),
        (("50 GB", "100 GB"), ("two years", "six months")),
        (
            "Archived email is deleted after 5 years.",
            "Attachments over 25 MB are removed from archived mail.",
        ),
    ),
    Fact(
        "it-helpdesk",
        "it/guest-wifi",
        (
            "Guest Wi-Fi. Visitors use the Kestrel-Guest network. Its password rotates every "
            "Monday and is shown on the reception screens. Guest access is valid for 24 hours.",
        ),
        (
            "What is the Wi-Fi for visitors?",
            "How do guests get the Wi-Fi password?",
        ),
        "Kestrel-Guest; the password rotates every Monday and is shown on the reception "
        "screens; access lasts 24 hours.",
        (
            "Visitors should join Kestrel-Guest. The password is displayed on the screens at "
            "reception and is changed every Monday.",
            "Guests connect to the Kestrel-Guest network. Their access lasts 24 hours, and the "
            "password is rotated each Monday.",
        ),
        (("Monday", "Friday"), ("24 hours", "7 days"), ("Kestrel-Guest", "Kestrel-Visitors")),
        (
            "Guests can also ask the IT desk for a personal access code.",
            "The guest network blocks video streaming.",
        ),
    ),
    Fact(
        "it-helpdesk",
        "it/printing",
        (
            "Printing. Printing is follow-me: send the job, then tap your badge at any printer. "
            "Colour printing requires a cost center code.",
        ),
        (
            "How do I print in the office?",
            "Do I need anything special to print in colour?",
        ),
        "Follow-me printing with a badge tap at any printer; colour needs a cost center code.",
        (
            "Just send your document to print, then tap your badge on any printer to pick it up.",
            "For colour you'll need a cost center code. Like every job, it's released when you tap "
            "your badge at the printer.",
        ),
        (("tap your badge", "enter your PIN code"), ("cost center code", "manager's approval")),
        (
            "Each employee has a quota of 200 pages per month.",
            "Printing from personal phones is not supported.",
        ),
    ),
    Fact(
        "it-helpdesk",
        "it/phishing",
        (
            "Phishing. Report suspicious email with the Report Phish button in Outlook. Do not "
            "forward the email. The security team responds within 4 hours.",
        ),
        (
            "What should I do with a phishing email?",
            "How do I report a suspicious email?",
        ),
        "Use the Report Phish button in Outlook, do not forward it; security responds within 4 "
        "hours.",
        (
            "Click the Report Phish button in Outlook, and please don't forward the message to "
            "anyone.",
            "Hit Report Phish; someone from the security team will get back to you within 4 hours.",
        ),
        (
            (
                "please don't forward the message to anyone",
                "forward the message to the security team as well",
            ),
            ("4 hours", "2 business days"),
            ("security team", "IT service desk"),
        ),
        (
            "Delete the email afterwards so it does not spread.",
            "You will receive a gift card for every confirmed phishing report.",
        ),
    ),
    Fact(
        "it-helpdesk",
        "it/service-desk-hours",
        (
            "Service desk hours. The IT service desk is open 07:00 to 19:00 CET, Monday to "
            "Friday. For urgent outages call the on-call hotline on extension 4400.",
        ),
        (
            "When is the IT helpdesk open?",
            "Who do I call for an urgent outage at night?",
        ),
        "07:00 to 19:00 CET Monday to Friday; urgent outages go to the on-call hotline on "
        "extension 4400.",
        (
            "The service desk is staffed from 07:00 to 19:00 CET on weekdays.",
            "For an urgent outage outside those hours, ring the on-call hotline on extension 4400.",
        ),
        (
            ("07:00 to 19:00", "09:00 to 17:00"),
            ("4400", "9100"),
            ("weekdays", "every day of the week"),
        ),
        (
            "The desk is also open on Saturdays from 10:00 to 14:00.",
            "Outages can be reported in the #it-outages chat channel.",
        ),
    ),
    # -------------------------------------------------------------------- billing
    Fact(
        "billing",
        "billing/refunds",
        (
            "Refunds. Annual plans can be fully refunded within 14 days of purchase. Monthly "
            "plans are not refunded.",
            "Cancellation. Monthly plans can be cancelled at any time; the cancellation takes "
            "effect at the end of the current billing period.",
        ),
        (
            "Can I get a refund on my annual plan?",
            "What happens if I cancel my monthly plan?",
            "What is your refund policy?",
        ),
        "Annual plans are fully refundable within 14 days of purchase; monthly plans are not "
        "refunded but can be cancelled any time, effective at the end of the period.",
        (
            "Annual plans get a full refund if you ask within 14 days of buying. Monthly plans "
            "aren't refundable.",
            "You can cancel a monthly plan whenever you like; it stays active until the current "
            "billing period ends. There's no refund for monthly plans, though.",
        ),
        (
            ("14 days", "30 days"),
            ("aren't refundable", "are refunded pro rata"),
            ("There's no refund for monthly plans", "Unused days of a monthly plan are refunded"),
            ("until the current billing period ends", "until the end of that day"),
        ),
        (
            "Refunds are issued as account credit rather than to the card.",
            "A cancellation fee of $25 applies to monthly plans.",
        ),
    ),
    Fact(
        "billing",
        "billing/prices",
        (
            "Plans. Starter costs $19 per user per month and Team costs $49 per user per month. "
            "Enterprise pricing is custom.",
            "Annual billing gives a 15% discount on Starter and Team.",
        ),
        (
            "How much does the Team plan cost?",
            "Is there a discount for paying annually?",
            "What are your plan prices?",
        ),
        "Starter is $19 and Team $49 per user per month, Enterprise is custom; annual billing "
        "gives 15% off.",
        (
            "Team is $49 per user each month, and if you pay for the year up front you save 15%.",
            "Starter costs $19 per user per month and Team $49; for Enterprise the price is agreed "
            "case by case.",
        ),
        (("$49", "$39"), ("$19", "$15"), ("15%", "25%")),
        (
            "Teams of more than 50 users get a further 10% off.",
            "The Starter plan is free for the first three users.",
        ),
        exchanges=(("Starter", "Team"),),
    ),
    Fact(
        "billing",
        "billing/invoices",
        (
            "Invoices are issued on the 1st of each month with payment terms of net 30. They can "
            "be downloaded as PDF from Billing > Invoices.",
        ),
        (
            "Where can I download my invoices?",
            "What are the payment terms on invoices?",
        ),
        "Invoices are issued on the 1st, net 30, and downloadable as PDF under Billing > Invoices.",
        (
            "You'll find them as PDFs under Billing > Invoices. A new one is issued on the 1st of "
            "every month.",
            "Each invoice is issued on the 1st of the month and is payable within 30 days (net "
            "30).",
        ),
        (
            ("Billing > Invoices", "Settings > Documents"),
            ("1st", "15th"),
            ("net 30", "net 60"),
            ("30 days", "60 days"),
        ),
        (
            "Invoices are also sent by post on request.",
            "Late payments incur 2% interest per month.",
        ),
    ),
    Fact(
        "billing",
        "billing/payment-methods",
        (
            "Payment methods. We accept credit cards and SEPA direct debit. Wire transfer is "
            "available for Enterprise plans only. PayPal is not accepted.",
        ),
        (
            "Can I pay with PayPal?",
            "Which payment methods do you accept?",
        ),
        "Credit card and SEPA direct debit; wire transfer for Enterprise only; no PayPal.",
        (
            "Sorry, we don't take PayPal. You can pay by credit card or by SEPA direct debit.",
            "Credit cards and SEPA direct debit are both accepted; wire transfer is available too, "
            "but only on Enterprise plans.",
        ),
        (
            ("Sorry, we don't take PayPal", "Yes, PayPal works too"),
            ("Enterprise", "all annual"),
            ("SEPA direct debit", "Apple Pay"),
        ),
        (
            "Cryptocurrency payments are accepted through a partner.",
            "Direct debit is only available in Germany.",
        ),
    ),
    Fact(
        "billing",
        "billing/failed-payments",
        (
            "Failed payments are retried 3 times over 7 days. After 14 days without payment the "
            "account becomes read-only.",
            "Data of accounts unpaid for 60 days is deleted.",
        ),
        (
            "What happens if my payment fails?",
            "When does my account become read-only for non-payment?",
        ),
        "Retried 3 times over 7 days; read-only after 14 days unpaid; data deleted after 60 days.",
        (
            "We'll retry a failed payment three times over 7 days. If it's still not paid 14 days "
            "in, the account switches to read-only.",
            "After 14 days without payment the account turns read-only, and when it reaches 60 "
            "days unpaid the data gets deleted.",
        ),
        (("three times", "five times"), ("14 days", "3 days"), ("60 days", "30 days")),
        (
            "A late fee of $15 is added to the next invoice.",
            "Your account manager is notified after the first failed retry.",
        ),
        exchanges=(("14 days", "60 days"),),
    ),
    Fact(
        "billing",
        "billing/vat",
        (
            "VAT. Customers in the EU are charged VAT unless they provide a valid VAT ID. With a "
            "valid VAT ID the invoice shows reverse charge.",
        ),
        (
            "Do you charge VAT?",
            "How do I avoid being charged VAT as an EU business?",
        ),
        "EU customers pay VAT unless they provide a valid VAT ID, in which case the invoice "
        "shows reverse charge.",
        (
            "EU customers pay VAT unless they give us a valid VAT ID; with one, the invoice shows "
            "reverse charge instead.",
            "Just add a valid VAT ID and your invoices will show reverse charge rather than VAT.",
        ),
        (("reverse charge", "zero-rated VAT"), ("VAT ID", "company registration number")),
        (
            "VAT already paid can be refunded for the last 24 months.",
            "UK customers are never charged VAT.",
        ),
    ),
    Fact(
        "billing",
        "billing/seats",
        (
            "Seats. Added seats are charged prorated to the day. Removed seats take effect at "
            "the next renewal.",
        ),
        (
            "How are extra seats billed?",
            "If I remove users, do I pay less right away?",
        ),
        "Added seats are prorated to the day; removed seats take effect at the next renewal.",
        (
            "New seats are billed pro rata by the day, while seats you remove only take effect at "
            "the next renewal.",
            "Not right away: removing seats only counts from your next renewal.",
        ),
        (("pro rata by the day", "for the full month"), ("next renewal", "end of the week")),
        (
            "Removed seats are credited back to your card immediately.",
            "You can add up to 10 seats for free each year.",
        ),
    ),
    Fact(
        "billing",
        "billing/trial",
        (
            "Free trial. The trial lasts 21 days and needs no credit card. The trial converts to "
            "the Starter plan only if a card has been added.",
        ),
        (
            "How long is the free trial?",
            "Do I need a credit card for the trial?",
        ),
        "21 days, no credit card needed; it converts to Starter only if a card was added.",
        (
            "The free trial runs for 21 days, and you don't need a credit card to start it.",
            "No card required. When the 21 days are up, the trial only turns into a Starter plan "
            "if you've added a card.",
        ),
        (
            ("21 days", "30 days"),
            ("Starter", "Team"),
            ("don't need a credit card", "need a credit card"),
        ),
        (
            "The trial can be extended once by 7 days through support.",
            "Trial workspaces are limited to 3 users.",
        ),
    ),
    Fact(
        "billing",
        "billing/currency",
        (
            "Currency. Accounts are billed in USD, EUR or GBP, chosen at signup. The currency "
            "cannot be changed during a contract.",
        ),
        (
            "Can I change my billing currency?",
            "Which currencies can I be billed in?",
        ),
        "USD, EUR or GBP chosen at signup; it cannot be changed during a contract.",
        (
            "You're billed in USD, EUR or GBP, whichever you picked when you signed up.",
            "The currency can't be changed while a contract is running; you choose it when you "
            "sign up.",
        ),
        (
            ("USD, EUR or GBP", "USD, EUR, GBP, CHF or JPY"),
            ("can't be changed", "can be changed once"),
        ),
        (
            "Exchange-rate differences are credited at renewal.",
            "Changing currency is possible for a one-time fee of $50.",
        ),
    ),
    Fact(
        "billing",
        "billing/nonprofit",
        (
            "Nonprofits. Registered nonprofits receive a 40% discount. Apply by sending your "
            "registration certificate to the billing team.",
        ),
        (
            "Do you have a nonprofit discount?",
            "How do charities apply for a discount?",
        ),
        "Registered nonprofits get 40% off by sending their registration certificate to the "
        "billing team.",
        (
            "Yes, registered nonprofits get 40% off.",
            "Email your registration certificate to the billing team and they'll apply the 40% "
            "nonprofit discount.",
        ),
        (
            ("40%", "60%"),
            ("registration certificate", "last annual report"),
            ("billing team", "sales team"),
        ),
        (
            "The discount also applies to universities and schools.",
            "Nonprofits get the Enterprise plan for free.",
        ),
    ),
    # --------------------------------------------------------------- product-docs
    Fact(
        "product-docs",
        "docs/rate-limits",
        (
            "Rate limits. The API allows 600 requests per minute per API key, with bursts of up "
            "to 100 requests. Requests over the limit get HTTP 429 with a Retry-After header.",
        ),
        (
            "What are the API rate limits?",
            "What happens when I exceed the rate limit?",
        ),
        "600 requests per minute per key, bursts of 100; over the limit you get 429 with "
        "Retry-After.",
        (
            "Each API key can make 600 requests a minute, with short bursts of up to 100 requests.",
            "Go over the limit of 600 requests per minute per key and you'll get an HTTP 429 "
            "response with a Retry-After header.",
        ),
        (
            ("600", "1,000"),
            ("100 requests", "250 requests"),
            ("429", "503"),
            ("a Retry-After header", "an X-RateLimit-Reset header"),
        ),
        (
            "Enterprise plans have no rate limit at all.",
            "Rate limits reset at midnight UTC.",
        ),
    ),
    Fact(
        "product-docs",
        "docs/webhooks",
        (
            "Webhooks. Failed deliveries are retried with exponential backoff up to 8 times over "
            "24 hours. Payloads are signed with HMAC-SHA256 in the X-Kestrel-Signature header.",
        ),
        (
            "How are webhook deliveries retried?",
            "How do I verify a webhook signature?",
        ),
        "Retried with exponential backoff up to 8 times over 24 hours; signed with HMAC-SHA256 "
        "in X-Kestrel-Signature.",
        (
            "If a delivery fails, it's retried with exponential backoff, up to 8 times within 24 "
            "hours.",
            "Check the HMAC-SHA256 signature that comes in the X-Kestrel-Signature header.",
        ),
        (
            ("8 times", "3 times"),
            ("24 hours", "72 hours"),
            ("HMAC-SHA256", "RSA-SHA1"),
            ("X-Kestrel-Signature", "X-Hub-Signature"),
        ),
        (
            "Webhooks are disabled automatically after 100 consecutive failures.",
            "Each delivery carries a timestamp you must check within 5 minutes.",
        ),
    ),
    Fact(
        "product-docs",
        "docs/data-retention",
        (
            "Data retention. Event data is kept for 13 months. Audit logs are kept for 7 years.",
            "Deleted data is purged from backups after 35 days.",
        ),
        (
            "How long do you keep event data?",
            "How long are audit logs retained?",
            "When is deleted data removed from backups?",
        ),
        "Event data 13 months, audit logs 7 years; deleted data leaves backups after 35 days.",
        (
            "We keep event data for 13 months, and audit logs for 7 years.",
            "Once data is deleted, it's purged from backups after 35 days. Event data itself is "
            "retained for 13 months.",
        ),
        (("13 months", "24 months"), ("7 years", "10 years"), ("35 days", "90 days")),
        (
            "Retention can be extended to 5 years on the Enterprise plan.",
            "Event data older than 30 days is compressed and cannot be queried.",
        ),
        exchanges=(("event data", "audit logs"),),
    ),
    Fact(
        "product-docs",
        "docs/sdks",
        (
            "SDKs. The Python SDK 3.2 requires Python 3.9 or newer. The Node SDK 5.x requires "
            "Node 18 or newer.",
        ),
        (
            "Which Python version does the SDK need?",
            "What Node version is required for the Node SDK?",
        ),
        "Python SDK 3.2 needs Python 3.9+; Node SDK 5.x needs Node 18+.",
        (
            "Version 3.2 of the Python SDK needs Python 3.9 or later.",
            "For the Node SDK (5.x) you need Node 18 or later.",
        ),
        (("Python 3.9", "Python 3.12"), ("Node 18", "Node 22"), ("3.2", "4.0")),
        (
            "A Go SDK is available in beta.",
            "The SDKs are generated from our OpenAPI spec every night.",
        ),
    ),
    Fact(
        "product-docs",
        "docs/sso",
        (
            "Single sign-on. SAML 2.0 and OIDC are supported on the Enterprise plan. SCIM "
            "provisioning is available for user sync.",
        ),
        (
            "Do you support SAML single sign-on?",
            "Which plan includes SSO?",
        ),
        "SAML 2.0 and OIDC on Enterprise, plus SCIM provisioning.",
        (
            "Yes, both SAML 2.0 and OIDC are supported, on the Enterprise plan.",
            "Single sign-on comes with Enterprise, and SCIM provisioning is available to keep "
            "users in sync.",
        ),
        (("Enterprise", "Team"), ("SAML 2.0 and OIDC", "SAML 1.1"), ("SCIM", "LDAP")),
        (
            "SSO setup takes about 2 weeks and is done by our onboarding team.",
            "Google Workspace login is included on every plan.",
        ),
    ),
    Fact(
        "product-docs",
        "docs/exports",
        (
            "Exports. CSV and Parquet exports are limited to 5 million rows. Larger exports go "
            "through the bulk export API, which delivers files to your S3 bucket.",
        ),
        (
            "How many rows can I export to CSV?",
            "How do I export a very large dataset?",
        ),
        "Up to 5 million rows as CSV or Parquet; larger exports via the bulk export API to S3.",
        (
            "A CSV or Parquet export can contain at most 5 million rows.",
            "Beyond 5 million rows, use the bulk export API; it drops the files into your S3 "
            "bucket.",
        ),
        (("5 million", "1 million"), ("S3 bucket", "Google Drive folder"), ("Parquet", "Excel")),
        (
            "Exports are kept for download for 7 days.",
            "Excel exports are supported up to 2 million rows.",
        ),
    ),
    Fact(
        "product-docs",
        "docs/regions",
        (
            "Regions. Data is hosted in Frankfurt (eu-central) or Virginia (us-east). The region "
            "is chosen when the workspace is created; migrations are done by support only.",
        ),
        (
            "Where is our data hosted?",
            "Can I move my workspace to another region?",
        ),
        "Frankfurt (eu-central) or Virginia (us-east), chosen at workspace creation; only "
        "support can migrate.",
        (
            "Your data lives either in Frankfurt (eu-central) or in Virginia (us-east), whichever "
            "was picked when the workspace was set up.",
            "Only support can migrate a workspace to another region; the region itself is chosen "
            "when the workspace is created.",
        ),
        (
            ("Frankfurt", "Dublin"),
            ("Virginia", "Oregon"),
            ("Only support can migrate", "You can migrate"),
        ),
        (
            "A Singapore region opens next quarter.",
            "Migrations between regions take about 4 hours of downtime.",
        ),
        exchanges=(("eu-central", "us-east"),),
    ),
    Fact(
        "product-docs",
        "docs/pagination",
        (
            "Pagination. List endpoints use cursor-based pagination with a default page size of "
            "50 and a maximum of 500. Cursors expire after 10 minutes.",
        ),
        (
            "What is the maximum page size of the API?",
            "How long is a pagination cursor valid?",
        ),
        "Cursor-based, default 50, maximum 500 per page; cursors expire after 10 minutes.",
        (
            "Pages hold 50 items by default and 500 at most.",
            "A cursor is only valid for 10 minutes, and a page can hold up to 500 items.",
        ),
        (("500", "1,000"), ("10 minutes", "1 hour"), ("50 items", "20 items")),
        (
            "Offset pagination is still supported for legacy endpoints.",
            "Cursors can be refreshed with the /cursor/renew endpoint.",
        ),
        exchanges=(("50", "500"),),
    ),
    Fact(
        "product-docs",
        "docs/sla",
        (
            "Uptime SLA. Team has a 99.9% monthly uptime commitment and Enterprise 99.95%. "
            "Service credits are 10% for each 0.1% below the commitment.",
        ),
        (
            "What is your uptime SLA?",
            "Do we get service credits for downtime?",
        ),
        "99.9% for Team, 99.95% for Enterprise; 10% credit per 0.1% below.",
        (
            "The Team plan commits to 99.9% monthly uptime, and Enterprise to 99.95%.",
            "Yes, you earn a 10% service credit for every 0.1% the uptime falls short of the "
            "commitment.",
        ),
        (("99.9%", "99.5%"), ("99.95%", "99.99%"), ("10%", "25%"), ("0.1%", "1%")),
        (
            "Starter also has a 99% uptime commitment.",
            "Credits are paid out in cash on request.",
        ),
        exchanges=(("Team", "Enterprise"),),
    ),
    Fact(
        "product-docs",
        "docs/api-keys",
        (
            "API keys are scoped to a workspace. Rotate them under Settings > API. After a "
            "rotation the old key stays valid for 24 hours.",
        ),
        (
            "How do I rotate an API key?",
            "Does the old API key stop working immediately after rotation?",
        ),
        "Under Settings > API; keys are workspace-scoped and the old key stays valid for 24 hours.",
        (
            "Go to Settings > API to rotate it. Your old key keeps working for another 24 hours.",
            "No, the previous key remains valid for 24 hours after you rotate it.",
        ),
        (("24 hours", "7 days"), ("Settings > API", "Account > Security")),
        (
            "Keys expire automatically after one year.",
            "Each workspace can have at most 5 active keys.",
        ),
    ),
)

#: for each fact, per question: the answers that address it (indexes into ``answers``)
PAIRS: dict[str, tuple[tuple[int, ...], ...]] = {
    "hr/annual-leave": ((0, 1), (0, 1), (0, 1)),
    "hr/parental-leave": ((0, 1), (0, 1), (0, 1)),
    "hr/remote-work": ((0, 1), (0,), (1,)),
    "hr/travel-expenses": ((0, 1), (0,), (0, 1)),
    "hr/sick-leave": ((0,), (0, 1), (1,)),
    "hr/learning-budget": ((0, 1), (1,)),
    "hr/probation-notice": ((0,), (0, 1)),
    "hr/referral-bonus": ((0, 1), (0, 1)),
    "hr/home-office": ((0, 1), (0, 1)),
    "hr/performance-reviews": ((0, 1), (0, 1)),
    "it/password-reset": ((0, 1), (0,), (1,)),
    "it/vpn": ((0, 1), (1,)),
    "it/laptops": ((0, 1), (1,)),
    "it/mfa": ((0,), (0, 1)),
    "it/software": ((0,), (1,)),
    "it/mailbox": ((0, 1), (0, 1)),
    "it/guest-wifi": ((0, 1), (0,)),
    "it/printing": ((0, 1), (1,)),
    "it/phishing": ((0, 1), (0, 1)),
    "it/service-desk-hours": ((0,), (1,)),
    "billing/refunds": ((0,), (1,), (0,)),
    "billing/prices": ((0, 1), (0,), (1,)),
    "billing/invoices": ((0,), (1,)),
    "billing/payment-methods": ((0,), (0, 1)),
    "billing/failed-payments": ((0,), (0, 1)),
    "billing/vat": ((0,), (1,)),
    "billing/seats": ((0,), (0, 1)),
    "billing/trial": ((0, 1), (0, 1)),
    "billing/currency": ((1,), (0,)),
    "billing/nonprofit": ((0, 1), (1,)),
    "docs/rate-limits": ((0, 1), (1,)),
    "docs/webhooks": ((0,), (1,)),
    "docs/data-retention": ((0, 1), (0,), (1,)),
    "docs/sdks": ((0,), (1,)),
    "docs/sso": ((0,), (0, 1)),
    "docs/exports": ((0,), (1,)),
    "docs/regions": ((0,), (1,)),
    "docs/pagination": ((0, 1), (1,)),
    "docs/sla": ((0,), (1,)),
    "docs/api-keys": ((0,), (0, 1)),
}

GREETINGS = ("", "", "", "Hi, ", "Hello! ", "Quick question: ", "Hey team, ")
CLOSINGS = ("", "", "", " Thanks!", " Thank you.", " I couldn't find it on the wiki.")

#: fictitious contact details (example.com, the 555-01xx range) so the demo shows redaction
PII_PREFIXES = (
    "Maria here (maria.rossi@example.com). ",
    "Please reply to j.okafor@example.com: ",
    "You can call me back on +1 555 0142. ",
    "This is Tom, phone 555-0178. ",
    "My work email is dev.lead@example.com. ",
    "Reach me at (555) 0199 if needed. ",
)

EVASIVE = (
    "I'm sorry, I don't have that information.",
    "I don't know.",
    "I'm not sure about that. You may want to check with {team}.",
    "That depends on several factors, so I can't give a definitive answer. Please contact {team}.",
    "I can't say for certain. It might vary; {team} would know more.",
    "Unfortunately I cannot answer that question.",
)

OFF_TOPIC_DRIFT = (
    "Our office cafeteria serves lunch from 11:30 to 14:00 every weekday.",
    "The company summer party takes place at the lake house every July.",
    "Meeting rooms can be booked in the calendar up to four weeks ahead.",
    "Remember to lock your screen whenever you leave your desk.",
)


def _pick_model(rng: random.Random) -> str:
    x = rng.random()
    acc = 0.0
    for name, share in MODELS:
        acc += share
        if x < acc:
            return name
    return MODELS[-1][0]


def _hallucinate(rng: random.Random, fact: Fact, answer: str) -> str:
    """Make ``answer`` wrong the ways LLM answers go wrong, most often subtly.

    One swapped detail (an amount, a date, a name, a product) in an otherwise faithful
    answer; two parties' roles exchanged (who gets what); every checkable detail swapped;
    an invented claim added, alone or after a swapped detail.
    """
    swaps = [(t, w) for t, w in fact.swaps if _replace(answer, {t: w}) != answer]
    exchanges = [(a, b) for a, b in fact.exchanges if a in answer and b in answer]
    kinds = {"invented": 2.0}
    if swaps:
        kinds |= {"one swap": 4.0, "swap and invented": 1.0}
    if len(swaps) > 1:
        kinds["every swap"] = 1.0
    if exchanges:
        kinds["exchange"] = 8.0  # few answers name both parties: take them when they do
    kind = rng.choices(list(kinds), weights=list(kinds.values()))[0]
    if kind == "exchange":
        return _exchange(answer, *rng.choice(exchanges))
    if kind == "every swap":
        for true, wrong in swaps:
            answer = _replace(answer, {true: wrong})
        return answer
    if kind == "invented":
        return answer + " " + rng.choice(fact.invented)
    true, wrong = rng.choice(swaps)
    answer = _replace(answer, {true: wrong})
    return answer if kind == "one swap" else answer + " " + rng.choice(fact.invented)


def _exchange(text: str, a: str, b: str) -> str:
    """``text`` with ``a`` and ``b`` (or their capitalised forms) exchanged."""
    mapping = {a: b, b: a, a[:1].upper() + a[1:]: b[:1].upper() + b[1:]}
    mapping[b[:1].upper() + b[1:]] = a[:1].upper() + a[1:]
    return _replace(text, mapping)


def _replace(text: str, mapping: dict[str, str]) -> str:
    """Each key of ``mapping`` replaced where it stands alone ("6 weeks", not in "16 weeks")."""
    alternatives = "|".join(re.escape(k) for k in sorted(mapping, key=len, reverse=True))
    return re.sub(rf"(?<![\w$.,])({alternatives})(?!\w)", lambda m: mapping[m[1]], text)


def _contexts(
    rng: random.Random,
    chunks: list[tuple[str, str]],
    noise: list[tuple[str, str]],
    structured: bool,
) -> list[object]:
    items = list(chunks)
    for extra in noise:
        items.insert(rng.randint(0, len(items)), extra)
    out: list[object] = []
    score = 0.92 - rng.random() * 0.05
    for chunk_id, text in items:
        if structured:
            out.append({"text": text, "id": chunk_id, "score": round(score, 3)})
            score -= 0.04 + rng.random() * 0.06
        else:
            out.append(text)
    return out


def _chunks(fact: Fact) -> list[tuple[str, str]]:
    return [(f"{fact.doc}#{i}", text) for i, text in enumerate(fact.chunks)]


def generate(count: int = COUNT, seed: int = SEED) -> list[dict[str, object]]:
    for fact in KB:
        pairs = PAIRS[fact.doc]
        if len(pairs) != len(fact.questions) or not all(
            p and all(0 <= i < len(fact.answers) for i in p) for p in pairs
        ):
            raise AssertionError(f"{fact.doc}: PAIRS does not match its questions and answers")
    rng = random.Random(seed)
    labels: list[str] = []
    while len(labels) < count:
        block = list(BLOCK)
        rng.shuffle(block)
        labels.extend(block)
    labels = labels[:count]

    when = datetime(2026, 11, 23, 7, 58, 0, tzinfo=UTC)
    pii_slots = set(rng.sample(range(count), len(PII_PREFIXES)))
    pii = iter(PII_PREFIXES)
    records: list[dict[str, object]] = []
    for index, label in enumerate(labels):
        fact = rng.choice(KB)
        others = [f for f in KB if f is not fact]
        which = rng.randrange(len(fact.questions))
        question = fact.questions[which]
        prefix = next(pii) if index in pii_slots else rng.choice(GREETINGS)
        if prefix.endswith((", ", ": ")):
            question = question[0].lower() + question[1:]
        user_input = prefix + question + rng.choice(CLOSINGS)

        chunks = _chunks(fact)
        answer = fact.answers[rng.choice(PAIRS[fact.doc][which])]
        if label == "faithful":
            response = answer
        elif label == "hallucinated":
            # its own stream: how an answer goes wrong moves no other record's draws
            response = _hallucinate(random.Random(f"{seed}:{index}"), fact, answer)
        elif label == "evasive":
            response = rng.choice(EVASIVE).format(team=TEAMS[fact.route])
        else:  # off_topic
            wrong = rng.choice([f for f in others if f.route != fact.route] or others)
            if rng.random() < 0.5:
                # the retriever fetched the wrong document and the model followed it
                chunks = _chunks(wrong)
                response = rng.choice(wrong.answers)
            else:
                # right documents, but the model drifted to another subject
                response = rng.choice(OFF_TOPIC_DRIFT + (rng.choice(wrong.answers),))

        noisy = rng.random() < NOISY_SHARE
        noise: list[tuple[str, str]] = []
        if noisy:
            present = {chunk_id.split("#")[0] for chunk_id, _ in chunks}
            candidates = [f for f in others if f.doc not in present]
            for other in rng.sample(candidates, rng.randint(1, 3)):
                i = rng.randrange(len(other.chunks))
                noise.append((f"{other.doc}#{i}", other.chunks[i]))

        structured = fact.route in ("hr-policy", "billing")
        contexts = _contexts(rng, chunks, noise, structured)

        metadata: dict[str, object] = {
            "route": fact.route,
            "model": _pick_model(rng),
            "tenant": rng.choice(TENANTS),
            "label": label,
            "noisy_retrieval": noisy,
            "source_doc": fact.doc,
        }
        bad = label != "faithful"
        x = rng.random()
        if (bad and x < 0.4) or (not bad and x < 0.03):
            metadata["feedback"] = "negative"
        elif not bad and x > 0.9:
            metadata["feedback"] = "positive"

        when += timedelta(seconds=rng.randint(3, 90))
        records.append(
            {
                "id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
                "user_input": user_input,
                "retrieved_contexts": contexts,
                "response": response,
                "reference": fact.reference,
                "timestamp": when.isoformat().replace("+00:00", "Z"),
                "metadata": metadata,
            }
        )
        if label == "hallucinated" and response == answer:
            raise AssertionError(f"{fact.doc}: no detail to invent in {answer!r}")
    return records


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--count", type=int, default=COUNT)
    parser.add_argument("--seed", type=int, default=SEED)
    args = parser.parse_args()
    records = generate(args.count, args.seed)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", encoding="utf-8", newline="\n") as f:
        for record in records:
            f.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n")
    metadata = [r["metadata"] for r in records]
    labels = Counter(str(m["label"]) for m in metadata if isinstance(m, dict))
    noisy = sum(1 for m in metadata if isinstance(m, dict) and m["noisy_retrieval"])
    print(
        f"wrote {len(records)} records to {args.out}: {dict(sorted(labels.items()))}, "
        f"{noisy} with noisy retrieval"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
