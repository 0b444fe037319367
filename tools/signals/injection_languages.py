"""The injection rules in other scripts and languages: Chinese, Japanese, Korean, Russian and Ukrainian, Arabic,
Hindi, Turkish, Polish, Vietnamese and Indonesian (German, French, Spanish, Italian, Dutch and Portuguese are in
injection_rules.py).

The English rules' shapes, per language: an order to drop the instructions ("忽略之前的所有指令", "игнорируй
предыдущие инструкции"), the system prompt named, an order for every user ("告诉所有用户", "сообщи всем
пользователям"), and "from now on" or "reply only" with the assistant named. MiniLM, the default embedder, is
English-centred, so the rules read the words themselves; each language's cues were written from its grammar and
its common words for these things, and measured on sentences written apart from them (evals/README.md, "Prompt
injection": the multilingual recall).
"""

from __future__ import annotations

import re

# The assistant, in these languages (AI, assistant, chatbot, model).
_AGENT = (
    r"(?:(?<![A-Za-z])AI(?![A-Za-z])|人工智能|智能助手|助手|助理|机器人|機器人|聊天机器人|语言模型|語言模型|大模型|アシスタント|人工知能|チャットボット"
    r"|어시스턴트|인공지능|챗봇|ИИ|ассистент\w*|помощник\w*|чат-?бот\w*|нейросет\w*|асистент\w*|помічник\w*|штучн\w+\s+інтелект\w*"
    r"|искусственн\w+\s+интеллект\w*|المساعد|الذكاء\s+الاصطناعي|روبوت\s+الدردشة|सहायक|एआई|चैटबॉट|asistan\w*|yapay\s+zeka"
    r"|sohbet\s+botu|asystent\w*|sztuczn\w+\s+inteligencj\w*|trợ\s+lý|trí\s+tuệ\s+nhân\s+tạo|asisten|kecerdasan\s+buatan"
    r"|chatbot\w*)"
)
_DROP_RULES = (
    # Chinese, Japanese, Korean: the verb after or before the instructions, no spaces.
    r"(?:忽略|忽视|忽視|无视|無視|忘记|忘記|不要理会|不要理會|抛开|拋開|放弃|放棄)[^。！？\n]{0,12}(?:指令|指示|说明|說明|规则|規則|提示|要求|设定|設定)"
    r"|(?:指示|命令|ルール|指令|設定)を(?:すべて|全て)?(?:無視|忘れ)"
    r"|(?:지시|지침|명령|규칙|설정)(?:을|를|은|는)?\s*(?:모두\s*)?(?:무시|잊)"
    # Russian, Ukrainian.
    r"|(?:проигнорир\w*|игнорир\w*|забудь\w*|забудьте|не\s+обращай\w*|отбрось\w*|ігнор\w*|проігнор\w*|забудь)"
    r"[^.!?\n]{0,40}?(?:инструкц\w*|указани\w*|правил\w*|ограничени\w*|інструкц\w*|вказівк\w*|обмежен\w*)"
    # Arabic, Hindi.
    r"|(?:تجاهل|انس|أهمل|تخط)\S*[^.!؟\n]{0,30}?(?:التعليمات|الأوامر|القواعد|الإرشادات)"
    r"|(?:निर्देशों|निर्देश|नियमों|नियम)[^।.!?\n]{0,30}?(?:अनदेखा|नजरअंदाज|नज़रअंदाज़|भूल)"
    # Turkish, Polish, Vietnamese, Indonesian.
    r"|(?:talimat\w*|kural\w*|komut\w*)[^.!?\n]{0,30}?(?:yok\s+say|görmezden\s+gel|unut)"
    r"|(?:zignoruj|ignoruj|zapomnij|pomiń)\w*[^.!?\n]{0,40}?(?:instrukcj\w*|polece\w*|zasad\w*|reguł\w*)"
    r"|(?:bỏ\s+qua|phớt\s+lờ|quên)[^.!?\n]{0,30}?(?:hướng\s+dẫn|chỉ\s+dẫn|quy\s+tắc|lệnh)"
    r"|(?:abaikan|lupakan)[^.!?\n]{0,30}?(?:instruksi|petunjuk|aturan|perintah)"
)
_SYSTEM_PROMPT = (
    r"系统提示|系統提示|系统指令|系統指令|隐藏指令|隱藏指令|システムプロンプト|시스템\s*프롬프트|системн\w+\s+(?:промпт\w*|подсказк\w*"
    r"|инструкц\w*|запрос\w*|підказк\w*|інструкц\w*)|موجه\s+النظام|تعليمات\s+النظام|सिस्टम\s+प्रॉम्प्ट|sistem\s+(?:istemi|komutu)"
    r"|prompt\w*\s+systemow\w*|instrukcj\w+\s+systemow\w*|lời\s+nhắc\s+hệ\s+thống|prompt\s+sistem"
)
_EVERY_USER = (
    r"(?:告诉|告訴|通知|提醒|回复|回覆)(?:所有|每个|每個|每位|每一位|全部)(?:的)?(?:用户|用戶|员工|員工|客户|客戶|人|同事)"
    r"|(?:すべて|全て|全員)の(?:ユーザー|利用者|社員|従業員|お客様)に"
    r"|모든\s*(?:사용자|직원|고객)(?:에게|들에게)"
    r"|(?:сообщ\w*|скаж\w*|говор\w*|передай\w*|отвечай\w*|повідом\w*|відповідай\w*)\s+(?:всем|каждому|всім|кожному)"
    r"\s+(?:пользовател\w*|сотрудник\w*|клиент\w*|користувач\w*|працівник\w*)"
    r"|(?:أخبر|أبلغ|أجب)\s+(?:جميع|كل)\s+(?:المستخدمين|الموظفين|العملاء)"
    r"|(?:सभी|हर)\s+(?:उपयोगकर्ताओं|कर्मचारियों|ग्राहकों)\s+को\s+(?:बताएं|बताओ|बताइए|कहें)"
    r"|(?:tüm|bütün|her)\s+(?:kullanıcılara|çalışanlara|müşterilere)"
    r"|(?:powiedz|poinformuj|przekaż|odpowiadaj)\s+(?:wszystkim|każdemu)"
    r"|(?:nói\s+với|thông\s+báo\s+cho|trả\s+lời)\s+(?:tất\s+cả|mọi)\s+(?:người\s+dùng|nhân\s+viên|khách\s+hàng)"
    r"|(?:beri\s*tahu|katakan\s+kepada|jawab)\s+(?:semua|setiap)\s+(?:pengguna|karyawan|pelanggan)"
)
_FROM_NOW = (
    r"从现在开始|從現在開始|从现在起|從現在起|从今以后|從今以後|今後は|これからは|지금부터|앞으로는|с\s+этого\s+момента|отныне|впредь"
    r"|з\s+цього\s+моменту|відтепер|من\s+الآن\s+فصاعدا|अब\s+से|bundan\s+sonra|şu\s+andan\s+itibaren|od\s+teraz|od\s+tej\s+chwili"
    r"|từ\s+bây\s+giờ|từ\s+giờ|mulai\s+sekarang|dari\s+sekarang"
)
_ONLY_REPLY = (
    r"(?:只|仅|僅|一律)(?:能)?(?:回答|回复|回覆|输出|輸出|说|說)|(?:のみ|だけ)(?:で)?(?:回答|返答|答え)|(?:만|오직)\s*(?:답|대답|응답)"
    r"|(?:отвечай\w*|ответь\w*|пиши|говори|відповідай\w*)\s+(?:только|всегда|лише|тільки|завжди)|(?:أجب|رد)\s+(?:فقط|دائما)"
    r"|(?:केवल|सिर्फ)[^।\n]{0,20}(?:जवाब|उत्तर)|(?:sadece|yalnızca|daima)\s+\S+\s*(?:cevap|yanıt)"
    r"|odpowiadaj\w*\s+(?:tylko|zawsze|wyłącznie)|(?:chỉ|luôn)\s+(?:trả\s+lời|phản\s+hồi)|(?:hanya|selalu)\s+(?:jawab|balas)"
)

OTHER_LANGUAGE_RULES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(pattern, re.IGNORECASE))
    for name, pattern in (
        ("other_script_override", _DROP_RULES),
        ("other_script_system_prompt", _SYSTEM_PROMPT),
        ("other_script_every_user", _EVERY_USER),
        (
            "other_script_order",
            rf"(?:{_FROM_NOW}|{_ONLY_REPLY})[^\n]{{0,60}}?{_AGENT}|{_AGENT}[^\n]{{0,60}}?(?:{_FROM_NOW}|{_ONLY_REPLY})",
        ),
        ("other_script_from_now_reply", rf"(?:{_FROM_NOW})[^\n]{{0,40}}?(?:{_ONLY_REPLY})"),
    )
)
